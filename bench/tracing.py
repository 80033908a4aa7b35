"""What tracing costs: enqueue(), enqueue_many() and a drain, untraced and traced (OpenTelemetry SDK).

    .venv/bin/python bench/tracing.py --database sqlite:////tmp/bench.sqlite3
    .venv/bin/python bench/tracing.py --database postgres://root@127.0.0.1:5432/dbjobs_bench --runs 5

"off": no tracer provider set (the API's default), so nothing is traced or stored.
"on": an SDK TracerProvider with a BatchSpanProcessor whose exporter drops the spans: every
span is made, recorded and handed on, but nothing is sent (an exporter's own cost is its
own). The drain's jobs are enqueued in the same mode and run by one ``run_jobs
--concurrency 2 --burst`` (BENCH_TRACING=1 gives the worker the same provider: bench/settings.py).
Runs take turns, off then on; CPU time per job is this process's for the enqueues and the
worker's for the drain, steadier than rates on a busy machine. Also the check each
enqueue and run makes when tracing is off, with ``opentelemetry`` not imported and
imported. Uses a scratch database, as bench/run.py does.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import scratch  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database", required=True, help="Database URL (django-environ syntax).")
    parser.add_argument("--runs", type=int, default=3, help="Runs per figure (median, min-max).")
    parser.add_argument("--jobs", type=int, default=5000, help="Jobs per enqueue loop; twice that drained.")
    options = parser.parse_args()
    scratch.setup(options.database)
    from django_dbjobs.observability import tracing

    unimported = _per_call_ns(tracing.tracer)  # before anything imports opentelemetry
    with scratch.scratch_database() as connection:
        import opentelemetry.trace  # noqa: F401 - imported, no provider: still off

        checks = {"off check, opentelemetry not imported (ns)": unimported}
        checks["off check, imported, no provider (ns)"] = _per_call_ns(tracing.tracer)
        results = measure(options.jobs, options.runs)
    print(f"tracing cost on {connection.vendor}: median (min-max) of {options.runs} runs")
    for label, samples in results.items():
        print(f"  {label:<48} {statistics.median(samples):>9.0f}  ({min(samples):.0f}-{max(samples):.0f})")
    for label, value in checks.items():
        print(f"  {label:<44} {value:>6.0f}")


def measure(count: int, runs: int) -> dict[str, list[float]]:
    """jobs/s, and CPU µs per job (this process's for the enqueues, the worker's for the drain)."""
    from bench import jobs
    from bench.run import DEFAULTS
    from bench.workloads import drain, taking_turns, w1_many, w1_single

    provider = _provider()
    traced_drain = {**DEFAULTS, "env": {"BENCH_TRACING": "1"}}
    workloads = {
        "enqueue()": (lambda: w1_single(count), None, time.process_time),
        "enqueue_many()": (lambda: w1_many(count), None, time.process_time),
        "drain, run_jobs --concurrency 2": (
            lambda: drain(jobs.noop, count * 2, DEFAULTS, []),
            lambda: drain(jobs.noop, count * 2, traced_drain, []),
            _children_cpu,
        ),
    }
    results: dict[str, list[float]] = {}
    for label, (off, on, clock) in workloads.items():
        jobs_run = count * 2 if label.startswith("drain") else count
        cpu: dict[str, list[float]] = {"off": [], "on": []}
        samples = taking_turns(
            runs,
            _timed(_untraced(off), clock, cpu["off"], jobs_run),
            _timed(_traced(on or off, provider), clock, cpu["on"], jobs_run),
        )
        for mode, taken in zip(("off", "on"), samples, strict=True):
            results[f"{label}, {mode} (jobs/s)"] = taken
            results[f"{label}, {mode} (CPU µs/job)"] = cpu[mode]
    return results


def _timed(once, clock, cpu: list[float], count: int):
    def run() -> float:
        started = clock()
        done = once()
        cpu.append((clock() - started) / count * 1e6)
        return done

    return run


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _provider():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DroppingExporter()))
    return provider


def set_up_worker() -> None:
    """The worker's provider (bench/settings.py, BENCH_TRACING=1): as the enqueuer's."""
    from opentelemetry import trace

    trace.set_tracer_provider(_provider())


def _untraced(once):
    def run() -> float:
        _set(None)
        return once()

    return run


def _traced(once, provider):
    def run() -> float:
        _set(provider)
        try:
            return once()
        finally:
            provider.force_flush()
            _set(None)

    return run


def _set(provider) -> None:
    # The API sets a provider once per process; the benchmark switches it on and off.
    from opentelemetry import trace
    from opentelemetry.util._once import Once

    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    if provider is not None:
        trace.set_tracer_provider(provider)


def _per_call_ns(check) -> float:
    number = 200_000
    return min(timeit.repeat(check, number=number, repeat=5)) / number * 1e9


class DroppingExporter:
    """A span exporter that sends nothing: what is measured is the spans' making."""

    def export(self, spans):
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


if __name__ == "__main__":
    main()
