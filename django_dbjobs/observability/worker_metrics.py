"""The worker's Prometheus metrics: jobs started, finished by outcome, timed out; run durations, start delays.

Turned on by ``run_jobs --metrics-port`` (metrics_endpoint.py) and nothing else: only then
is ``prometheus_client`` imported and are the run hooks added. Labels stay few: the queue,
and the job's registered name as ``job_name`` (not ``job``: Prometheus gives every series
it scrapes a ``job`` label of its own, and would rename ours ``exported_job``). A name this
worker has not registered is counted as UNREGISTERED, so names read from the table never
grow the series without bound.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from .. import registry
from . import run_hooks
from .outcomes import outcome_of, timed_out

if TYPE_CHECKING:
    from ..models import Job

#: Seconds, for runs and waits alike: a few milliseconds (a quick job, a wake-up) to six
#: hours (a long job, a queue that fell far behind).
SECONDS_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    1800.0,
    3600.0,
    7200.0,
    21600.0,
)
#: The `job_name` label of a job whose name this worker has not registered.
UNREGISTERED = "(unregistered)"


def job_label(name: str) -> str:
    return name if registry.lookup(name) is not None else UNREGISTERED


class WorkerMetrics:
    """The worker's metrics, in `collectors` (prometheus_client's default registry if None)."""

    def __init__(self, collectors: Any = None):
        from prometheus_client import REGISTRY, Counter, Histogram

        collectors = REGISTRY if collectors is None else collectors
        self.started = Counter(
            "dbjobs_jobs_started",
            "Job runs started by this worker.",
            ["queue", "job_name"],
            registry=collectors,
        )
        self.finished = Counter(
            "dbjobs_jobs_finished",
            "Job outcomes stored: succeeded, retried, failed (dead-lettered), cancelled.",
            ["queue", "job_name", "outcome"],
            registry=collectors,
        )
        self.timed_out = Counter(
            "dbjobs_jobs_timed_out",
            "Job attempts that ran past their timeout (each also counted by its outcome).",
            ["queue", "job_name"],
            registry=collectors,
        )
        self.duration = Histogram(
            "dbjobs_job_duration_seconds",
            "Seconds from a job's start to its outcome being stored or handed on.",
            ["queue", "job_name"],
            buckets=SECONDS_BUCKETS,
            registry=collectors,
        )
        self.start_delay = Histogram(
            "dbjobs_job_start_delay_seconds",
            "Seconds from a job's due time (run_at) to its start.",
            ["queue"],
            buckets=SECONDS_BUCKETS,
            registry=collectors,
        )
        # labels() checks and locks on every call: a worker's few series are looked up once,
        # keyed by their labels (not by the raw name: unknown names share one entry).
        self._by_job: dict[tuple[str, str], tuple[Any, Any, Any]] = {}
        self._children: dict[tuple[Any, ...], Any] = {}

    def hook(self) -> None:
        """Count every run and outcome of this process from now on."""
        run_hooks.add_wrapper(self.run)
        run_hooks.add_listener(self.outcome)

    def unhook(self) -> None:
        run_hooks.remove(self.run)
        run_hooks.remove(self.outcome)

    @contextmanager
    def run(self, job: Job) -> Iterator[None]:
        """Count `job`'s start and its wait since it was due; time its run."""
        started, duration, start_delay = self._series(job.queue, job_label(job.name))
        started.inc()
        if job.run_at is not None:  # host clock against the database's: NTP keeps them close
            start_delay.observe(max((timezone.now() - job.run_at).total_seconds(), 0.0))
        began = time.perf_counter()
        try:
            yield
        finally:
            duration.observe(time.perf_counter() - began)

    def outcome(self, job: Job, status: str, failure: BaseException | None) -> None:
        """Count a stored outcome of `job` under its `outcome` label, and a timeout apart."""
        label = outcome_of(job, status, failure)
        if label is None:
            return
        name = job_label(job.name)
        self._child(self.finished, job.queue, name, label).inc()
        if timed_out(failure):
            self._child(self.timed_out, job.queue, name).inc()

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (metric, *labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found

    def _series(self, queue: str, label: str) -> tuple[Any, Any, Any]:
        found = self._by_job.get((queue, label))
        if found is None:
            found = self._by_job[queue, label] = (
                self.started.labels(queue, label),
                self.duration.labels(queue, label),
                self.start_delay.labels(queue),
            )
        return found


_recording: WorkerMetrics | None = None


def record() -> WorkerMetrics:
    """Turn the worker's metrics on in this process (once): create them and hook them to runs."""
    global _recording
    if _recording is None:
        _recording = WorkerMetrics()
        _recording.hook()
    return _recording
