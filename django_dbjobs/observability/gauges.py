"""The database-derived gauges (jobs by queue and state, lag, workers, flow control, batches) as plain values.

What dbjobs_status reads (operations/status.py: a handful of grouped queries on partial
indexes, never the finished successes; without the jobs handed back as unknown), plus
the running jobs per worker on the running-jobs index, and what holds back the cleanup
of dead rows (db/horizon.py: two statements), turned into named gauges.
Nothing here imports prometheus_client: gauges_view.py renders them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count

from ..db.horizon import Horizon, read_horizon
from ..models import Blocked, Job
from ..operations.status import Status, read_status

#: Label values of dbjobs_jobs_blocked: why flow control holds a READY job back.
BLOCKED_REASONS = {
    Blocked.CONCURRENCY: "concurrency",
    Blocked.RATE: "rate",
    Blocked.AFTER: "dependencies",
}


@dataclass
class Gauge:
    """One gauge family: its name, help text, label names and (label values, value) samples."""

    name: str
    documentation: str
    labels: tuple[str, ...] = ()
    samples: list[tuple[tuple[str, ...], float]] = field(default_factory=list)

    def add(self, value: float, *labels: str) -> None:
        self.samples.append((labels, float(value)))


def read_gauges(using: str = "default") -> list[Gauge]:
    """Every gauge, read from the database `using` at one moment of its clock."""
    # Without the hand-backs, whose count reads every ready job's row (dbjobs_status has them).
    status = read_status(using=using, hand_backs=False)
    held = dict(
        Job.objects.using(using).running().values_list("worker").annotate(count=Count("*")).order_by()
    )
    return [
        *queue_gauges(status),
        *worker_gauges(status, held),
        *flow_gauges(status),
        *horizon_gauges(read_horizon(using)),
    ]


def queue_gauges(status: Status) -> list[Gauge]:
    jobs = Gauge(
        "dbjobs_jobs",
        "Jobs stored, by queue and state: ready_due (READY and due), ready_later (READY, due later or "
        "waiting for other jobs), running, failed (the dead letters). Finished successes are not "
        "counted here: the worker metrics count them as they finish.",
        ("queue", "state"),
    )
    blocked = Gauge(
        "dbjobs_jobs_blocked",
        "READY jobs flow control holds back, by queue and reason: concurrency (waiting for a "
        "concurrency slot), rate (in a rate-limited queue), dependencies (waiting for other jobs).",
        ("queue", "reason"),
    )
    lag = Gauge(
        "dbjobs_queue_lag_seconds",
        "Seconds the oldest due READY job of the queue has waited (database clock); 0 when none is due.",
        ("queue",),
    )
    dead = Gauge("dbjobs_dead_letters", "FAILED jobs (dead letters) of the queue.", ("queue",))
    paused = Gauge("dbjobs_queue_paused", "1 if the queue is paused, else 0.", ("queue",))
    serving = Gauge("dbjobs_queue_workers", "Live workers that take jobs from the queue.", ("queue",))
    for row in status.queues:
        for state, count in (
            ("ready_due", row.due),
            ("ready_later", row.later),
            ("running", row.running),
            ("failed", row.failed),
        ):
            jobs.add(count, row.name, state)
        for reason, label in BLOCKED_REASONS.items():
            blocked.add(row.blocked.get(reason, 0), row.name, label)
        lag.add(row.lag or 0.0, row.name)
        dead.add(row.failed, row.name)
        paused.add(int(row.paused), row.name)
        serving.add(sum(worker.serves(row.name) for worker in status.workers), row.name)
    return [jobs, blocked, lag, dead, paused, serving]


def worker_gauges(status: Status, held: dict[str, int]) -> list[Gauge]:
    """The live workers (heartbeat within DBJOBS_HEARTBEAT_TIMEOUT), their threads and held jobs."""
    live = Gauge("dbjobs_workers", "Live run_jobs processes (heartbeat within DBJOBS_HEARTBEAT_TIMEOUT).")
    live.add(len(status.workers))
    # By host and pid, not by the worker's id: a new id at every start would be a new series.
    # Two live rows of one host and pid (a container restarted before its old heartbeat went
    # stale) are added up: one series each, or the scrape is refused as duplicated.
    by_process: dict[tuple[str, str], tuple[int, int]] = {}
    for worker in status.workers:
        process = (worker.hostname, str(worker.pid))
        threads_of, running_of = by_process.get(process, (0, 0))
        by_process[process] = (threads_of + worker.concurrency, running_of + held.get(worker.id, 0))
    threads = Gauge("dbjobs_worker_threads", "Job threads of each live worker.", ("hostname", "pid"))
    running = Gauge(
        "dbjobs_worker_running_jobs",
        "RUNNING jobs each live worker holds (prefetched jobs not started yet included).",
        ("hostname", "pid"),
    )
    for process, (threads_of, running_of) in by_process.items():
        threads.add(threads_of, *process)
        running.add(running_of, *process)
    return [live, threads, running]


def flow_gauges(status: Status) -> list[Gauge]:
    """Concurrency keys, rate use, jobs asked to stop, batches and stuck workflows."""
    keys = Gauge(
        "dbjobs_concurrency_keys_at_limit",
        "Concurrency keys with every slot in use and jobs waiting for one.",
    )
    keys.add(len(status.flow.keys_at_limit) + status.flow.more_keys)
    used = Gauge(
        "dbjobs_queue_rate_used",
        "Jobs of the rate-limited queue started in the last period (DBJOBS_QUEUE_LIMITS).",
        ("queue",),
    )
    limit = Gauge("dbjobs_queue_rate_limit", "Jobs the rate-limited queue may start per period.", ("queue",))
    period = Gauge("dbjobs_queue_rate_period_seconds", "The rate-limited queue's period.", ("queue",))
    for rate in status.flow.rates:
        used.add(rate.used, rate.queue)
        limit.add(rate.rate.count, rate.queue)
        period.add(rate.rate.period, rate.queue)
    stopping = Gauge("dbjobs_jobs_cancelling", "RUNNING jobs asked to stop that have not stopped yet.")
    stopping.add(status.flow.stopping)
    batches = Gauge("dbjobs_batches_open", "Batches with jobs not finished yet.")
    batches.add(status.workflows.open_batches)
    oldest = Gauge(
        "dbjobs_batch_oldest_open_age_seconds",
        "Seconds since the oldest open batch was created; 0 when none is open.",
    )
    opened = status.workflows.oldest_open
    oldest.add(max((status.checked_at - opened).total_seconds(), 0.0) if opened else 0.0)
    stuck = Gauge("dbjobs_workflows_stuck", "Workflows that can no longer finish (a cycle, a missing job).")
    stuck.add(len(status.workflows.stuck))
    return [keys, used, limit, period, stopping, batches, oldest, stuck]


def horizon_gauges(horizon: Horizon) -> list[Gauge]:
    """The oldest transaction holding back cleanup, our tables' dead rows, InnoDB's history list.

    A part the database's role may not read is left out, not reported as 0: the seconds too
    when the oldest horizon belongs to a session whose age the role may not see (PostgreSQL
    without pg_read_all_stats); the age in transactions is shown to every role. No pid
    label: each new culprit would be a new series.
    """
    oldest = Gauge(
        "dbjobs_database_oldest_transaction_seconds",
        "Seconds the transaction (or prepared transaction) with the oldest horizon among those "
        "holding back the cleanup of dead rows has been open: this database's on PostgreSQL, the "
        "server's on MariaDB/MySQL (READ COMMITTED: its running statement's); 0 when none (and on "
        "SQLite). dbjobs_status names it.",
    )
    xmin = Gauge(
        "dbjobs_database_oldest_xmin_age",
        "PostgreSQL: how many transactions old the oldest horizon of this database's tables is "
        "(sessions, prepared transactions, walsenders, replication slots' xmin); 0 when nothing holds one.",
    )
    dead = Gauge(
        "dbjobs_table_dead_rows",
        "Dead rows of the table that vacuum has not removed yet (PostgreSQL's n_dead_tup).",
        ("table",),
    )
    history = Gauge(
        "dbjobs_database_history_length",
        "InnoDB's history list length: undo records purge has not removed yet (MariaDB/MySQL).",
    )
    if horizon.holders_read and not horizon.oldest_hidden:
        culprit = horizon.oldest
        oldest.add(culprit.age if culprit is not None and culprit.age is not None else 0.0)
    if horizon.holders_read and horizon.counts_xids:
        xmin.add(horizon.oldest_xmin_age or 0)
    for table in horizon.tables:
        dead.add(table.dead, table.table)
    if horizon.history_length is not None:
        history.add(horizon.history_length)
    return [oldest, xmin, dead, history]
