"""The workloads W1 (enqueue), W2 (drain), W2s (10 ms jobs) and W3 (wake-up latency)."""

import statistics
import time

from django.core.management.color import no_style
from django.db import connection
from django.db.models import Max, Min

from bench import jobs, raw
from bench.run import DEFAULTS, FASTEST, FASTEST_SLEEPY, Workers, summarise
from django_dbjobs import bulk_enqueue, enqueue, enqueue_many, prepare
from django_dbjobs.models import Job, JobStatus, WorkerProcess


def fresh_tables() -> None:
    sql = connection.ops.sql_flush(no_style(), [Job._meta.db_table, WorkerProcess._meta.db_table])
    connection.ops.execute_sql_flush(sql)


def repeat(runs: int, once) -> list[float]:
    return taking_turns(runs, once)[0]


def taking_turns(runs: int, *onces) -> list[list[float]]:
    """repeat() for several loops at once, run 1 of each, then run 2 of each, ...: a noisy
    moment on the machine is shared by the figures compared, not borne by one of them."""
    samples: list[list[float]] = [[] for _ in onces]
    for _ in range(runs):
        for once, taken in zip(onces, samples, strict=True):
            fresh_tables()
            taken.append(once())
    return samples


def w1_single(count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        enqueue(jobs.noop)
    return count / (time.perf_counter() - started)


def w1_bulk(count: int) -> float:
    started = time.perf_counter()
    bulk_enqueue(prepare(jobs.noop) for _ in range(count))
    return count / (time.perf_counter() - started)


def w1_many(count: int) -> float:
    started = time.perf_counter()
    enqueue_many(jobs.noop, [()] * count)
    return count / (time.perf_counter() - started)


def drain(job, count: int, setup: dict, rss: list[float]) -> float:
    """Drain `count` pre-enqueued jobs; jobs/s from the first claim to the last finish (database clock)."""
    bulk_enqueue(prepare(job) for _ in range(count))
    workers = Workers(setup["processes"], setup["args"], setup["env"])
    rss.extend(workers.wait())
    left = Job.objects.exclude(status=JobStatus.SUCCESSFUL).count()
    if left:
        raise SystemExit(f"{left} jobs were not drained")
    span = Job.objects.aggregate(first=Min("started_at"), last=Max("finished_at"))
    return count / max((span["last"] - span["first"]).total_seconds(), 1e-6)


def raw_drain(count: int, claim_size: int, batched: bool) -> float:
    bulk_enqueue(prepare(jobs.noop) for _ in range(count))
    return raw.drain_loop(claim_size, batched)


def wakeup(count: int, idle_rss: list[float]) -> list[float]:
    """Milliseconds from each enqueue's commit to its job's start, one job at a time."""
    workers = Workers(**DEFAULTS, burst=False)
    deadline = time.monotonic() + 30
    while not WorkerProcess.objects.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)
    idle_rss.extend(workers.rss_mib())
    committed = {}
    for _ in range(count):
        job = enqueue(jobs.stamp)
        committed[job.pk] = time.time()
        time.sleep(0.05)
    deadline = time.monotonic() + 60
    while Job.objects.filter(status=JobStatus.SUCCESSFUL).count() < count and time.monotonic() < deadline:
        time.sleep(0.05)
    workers.stop()
    workers.wait()
    started = dict(Job.objects.values_list("pk", "return_value"))
    return sorted((started[pk] - at) * 1000 for pk, at in committed.items() if started.get(pk))


def run_all(runs: int, scale: float, only: set[str]) -> dict:
    n1, n2, n2s, n3 = (max(int(n * scale), 20) for n in (5000, 10000, 2000, 100))
    results = {}
    if "W1" in only:
        results.update(w1_all(runs, n1))
    if "W2" in only:
        results.update(w2_all(runs, n2))
    if "W2s" in only:
        results.update(w2s_all(runs, n2s))
    if "W3" in only:
        results.update(w3_all(runs, n3))
    if "W4" in only:
        results.update(w4_all(runs, max(int(400 * scale), 20)))
    if "W8" in only:
        from bench import memory

        results.update(memory.w8_all(runs, n2, taking_turns))
    if "W9" in only:
        from bench import cpu

        results.update(cpu.w9_all(runs, n2, taking_turns))
    if "W6" in only:
        from bench import flow

        results.update(flow.w6_all(runs, scale, taking_turns))
    if "W11" in only:
        from bench import index_cost

        results.update(index_cost.w11_all(runs, n1, n2, taking_turns))
    if "W13" in only:
        from bench import bulk_sizes

        results.update(bulk_sizes.w13_all(runs, scale, taking_turns))
    if "W7" in only:
        from bench import workflows

        results.update(workflows.w7_all(runs, scale, taking_turns))
    if "W10" in only:
        from bench import metrics

        results.update(metrics.w10_all(runs, n2, taking_turns))
    if "W5" in only:
        # Enough jobs that starting 16 interpreters on 2 cores is not most of what is timed.
        results.update(w5_all(runs, n2 * 10))
    return results


def w1_all(runs: int, n1: int) -> dict:
    """Each figure next to its raw limit, their runs taking turns (taking_turns())."""
    results = {}
    raw_insert, single = taking_turns(runs, lambda: raw.insert_loop(n1), lambda: w1_single(n1))
    results["W1 raw INSERT loop (limit)"] = summarise(raw_insert)
    results["W1 enqueue(), one per transaction"] = {
        **summarise(single),
        "limit": statistics.median(raw_insert),
    }
    raw_bulk, many, bulk = taking_turns(
        runs, lambda: raw.bulk_insert_loop(n1), lambda: w1_many(n1), lambda: w1_bulk(n1)
    )
    results["W1 raw multi-row INSERT (limit)"] = summarise(raw_bulk)
    results["W1 enqueue_many()"] = {**summarise(many), "limit": statistics.median(raw_bulk)}
    results["W1 prepare() + bulk_enqueue()"] = {**summarise(bulk), "limit": statistics.median(raw_bulk)}
    return results


def w2_all(runs: int, n2: int) -> dict:
    results = {}
    raw10 = summarise(repeat(runs, lambda: raw_drain(n2, 10, False)))
    raw100 = summarise(repeat(runs, lambda: raw_drain(n2, 100, True)))
    results["W2 raw: claim 10 + 1 write/job (limit)"] = raw10
    results["W2 raw: claim 100 + 1 write/100 (limit)"] = raw100
    rss_default, rss_fast = [], []
    results["W2 drain, defaults, --concurrency 2"] = {
        **summarise(repeat(runs, lambda: drain(jobs.noop, n2, DEFAULTS, rss_default))),
        "limit": raw10["median"],
    }
    results["W2 drain, fastest settings"] = {
        **summarise(repeat(runs, lambda: drain(jobs.noop, n2, FASTEST[connection.vendor], rss_fast))),
        "limit": raw100["median"],
    }
    results["W2 peak RSS per worker, defaults"] = {**summarise(rss_default), "unit": "MiB"}
    return results


def w2s_all(runs: int, n2s: int) -> dict:
    return {
        "W2s 10 ms jobs, --concurrency 2": {
            **summarise(repeat(runs, lambda: drain(jobs.sleep_10ms, n2s, DEFAULTS, []))),
            "limit": 200.0,
        },
        "W2s 10 ms jobs, fastest settings": summarise(
            repeat(runs, lambda: drain(jobs.sleep_10ms, n2s, FASTEST_SLEEPY, []))
        ),
    }


def w3_all(runs: int, n3: int) -> dict:
    """The wake-up of an idle run_jobs; on PostgreSQL beside the raw limit (raw_listener.py),
    their runs taking turns. MySQL/MariaDB and SQLite have no notification to wait on: an
    idle worker looks for work at an interval, which sets their figure (no raw limit)."""
    results = {}
    idle_rss = []

    def ours() -> list[float]:
        fresh_tables()
        return wakeup(n3, idle_rss)

    def limit() -> list[float]:
        fresh_tables()
        return raw.wakeup_loop(n3, lambda: enqueue(jobs.stamp).pk)

    if connection.vendor == "postgresql":
        latencies, raw_latencies = taking_turns(runs, ours, limit)
    else:
        latencies, raw_latencies = repeat(runs, ours), []
    for name, figures in (("W3 raw wake-up", raw_latencies), ("W3 wake-up", latencies)):
        if not figures:
            continue
        quantiles = {
            "p50": [lat[len(lat) // 2] for lat in figures],
            "p95": [lat[int(len(lat) * 0.95)] for lat in figures],
            "max": [lat[-1] for lat in figures],
        }
        for quantile, values in quantiles.items():
            label = f"{name} {quantile}" + (" (limit)" if name.startswith("W3 raw") else "")
            results[label] = {**summarise(values), "unit": "ms"}
    if raw_latencies:
        for quantile in ("p50", "p95"):
            limit = results[f"W3 raw wake-up {quantile} (limit)"]["median"]
            results[f"W3 wake-up {quantile}"]["limit"] = limit
    results["idle worker RSS"] = {**summarise(idle_rss), "unit": "MiB"}
    return results


def w4_all(runs: int, n4: int) -> dict:
    """CPU-bound jobs (about 5 ms of pure Python each): one process against two (--processes 2)."""
    one = summarise(repeat(runs, lambda: drain(jobs.cpu_5ms, n4, CPU_ONE, [])))
    two = summarise(repeat(runs, lambda: drain(jobs.cpu_5ms, n4, CPU_TWO, [])))
    return {
        "W4 5 ms CPU jobs, 1 process": one,
        "W4 5 ms CPU jobs, --processes 2": {**two, "limit": one["median"]},
    }


CPU_ONE = {"processes": 1, "args": ["--concurrency", "1"], "env": {}}
CPU_TWO = {"processes": 1, "args": ["--processes", "2", "--concurrency", "1"], "env": {}}


def w5_all(runs: int, n5: int) -> dict:
    """Many workers on one database: 16 and 32 worker processes against 2 (no-op jobs, one
    thread each), their runs taking turns. Twice: started with the jobs waiting (their
    start-up, about a second of CPU each, shares the two cores with the drain), and
    started first, the jobs enqueued once every process is up (the fleet's throughput)."""
    figures = taking_turns(
        runs,
        *(lambda setup=setup: drain(jobs.noop, n5, setup, []) for setup in MANY),
        *(lambda setup=setup: drain_running(jobs.noop, n5, setup) for setup in MANY),
    )
    results = {}
    for offset, kind in ((0, ""), (len(MANY), ", already running")):
        two = summarise(figures[offset])
        results[f"W5 drain, 2 processes{kind}"] = two
        for setup, taken in zip(MANY[1:], figures[offset + 1 : offset + len(MANY)], strict=True):
            name = f"W5 drain, {setup['args'][1]} processes{kind}"
            results[name] = {**summarise(taken), "limit": two["median"]}
    return results


def drain_running(job, count: int, setup: dict) -> float:
    """Start the workers, wait until each process is up and idle, then enqueue `count` jobs in
    one transaction; jobs/s from the first claim to the last finish (database clock)."""
    processes = int(setup["args"][setup["args"].index("--processes") + 1])
    workers = Workers(setup["processes"], setup["args"], setup["env"], burst=False)
    try:
        deadline = time.monotonic() + 120
        while WorkerProcess.objects.count() < processes:
            if time.monotonic() > deadline:
                raise SystemExit("the worker processes did not all start")
            time.sleep(0.2)
        time.sleep(1.0)  # past each one's first claim
        enqueue_many(job, [()] * count)
        deadline = time.monotonic() + 600
        while Job.objects.exclude(status=JobStatus.SUCCESSFUL).exists():
            if time.monotonic() > deadline or Job.objects.filter(status=JobStatus.FAILED).exists():
                raise SystemExit("the jobs were not drained")
            time.sleep(0.5)
    finally:
        workers.stop()
        workers.wait()
    span = Job.objects.aggregate(first=Min("started_at"), last=Max("finished_at"))
    return count / max((span["last"] - span["first"]).total_seconds(), 1e-6)


MANY_TWO = {
    "processes": 1,
    "args": ["--processes", "2", "--concurrency", "1"],
    "env": {},
}
MANY_SIXTEEN = {
    "processes": 1,
    "args": ["--processes", "16", "--concurrency", "1"],
    "env": {},
}
MANY_THIRTY_TWO = {
    "processes": 1,
    "args": ["--processes", "32", "--concurrency", "1"],
    "env": {},
}
MANY = [MANY_TWO, MANY_SIXTEEN, MANY_THIRTY_TWO]
