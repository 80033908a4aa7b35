"""The health of the queues, for `manage.py dbjobs_status`: counts, lag, workers, and verdicts.

A handful of grouped queries on partial indexes (queue_stats.queue_rows(), the jobs
handed back as unknown, flow control (flow_status.py), open batches and the dependency rows
still to count (workflow_status.py), one on the worker table, and, for dbjobs_status when
there are dead letters, their causes (observability/failure_groups.py: the index of causes
alone, and one row per cause shown), and the long transactions (long_transactions.py: the
server's views, two statements), never a scan of the finished jobs' rows, so it is
cheap enough for a probe that runs every few seconds against a table of millions of rows.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from ..models import WorkerProcess
from ..models.clock import database_clock
from ..observability.failure_groups import STATUS_CAUSES, Cause, causes
from . import unknown_jobs
from .flow_status import FlowStatus, read_flow
from .long_transactions import LongTransactions, read_long_transactions
from .queue_stats import QueueRow, queue_rows
from .running_jobs import RunningJobs, read_running_jobs
from .unknown_jobs import UnknownName
from .workflow_status import WorkflowStatus, read_workflows


@dataclass
class Status:
    """The queues and live workers at one moment of the database clock."""

    checked_at: datetime.datetime
    queues: list[QueueRow]
    workers: list[WorkerProcess]
    problems: list[str] = field(default_factory=list)
    #: The queues asked about (--queues); None: every queue.
    asked: list[str] | None = None
    #: Job names a worker did not know, with READY jobs waiting for one that does.
    unknown: list[UnknownName] = field(default_factory=list)
    #: Concurrency keys at their limit, rate use, jobs asked to stop.
    flow: FlowStatus = field(default_factory=FlowStatus)
    #: Batches not finished yet, and what can no longer finish.
    workflows: WorkflowStatus = field(default_factory=WorkflowStatus)
    #: The most frequent causes of the dead letters (observability/failure_groups.py).
    causes: list[Cause] = field(default_factory=list)
    #: Who holds back the cleanup of dead rows (read for dbjobs_status only).
    long_transactions: LongTransactions | None = None
    #: The longest running jobs and their progress (read for dbjobs_status only).
    running: RunningJobs | None = None

    @property
    def serving(self) -> list[WorkerProcess]:
        """The live workers that take jobs from the queues asked about (all of them when none)."""
        if not self.asked:
            return self.workers
        return [w for w in self.workers if any(w.serves(queue) for queue in self.asked)]

    def served(self, queue: str) -> bool:
        """Whether a live worker takes jobs from `queue`."""
        return any(worker.serves(queue) for worker in self.workers)

    def unserved(self, row: QueueRow) -> bool:
        """Whether the queue of `row` has due jobs, is not paused, and no live worker serves it."""
        return bool(row.due) and not row.paused and not self.served(row.name)

    @property
    def failed(self) -> int:
        return sum(row.failed for row in self.queues)

    def as_json(self) -> dict[str, Any]:
        return {
            "checked_at": self.checked_at.isoformat(),
            "healthy": not self.problems,
            "problems": self.problems,
            "queues": [
                {
                    "name": row.name,
                    "ready_due": row.due,
                    "ready_later": row.later,
                    "running": row.running,
                    "failed": row.failed,
                    "oldest_due_age_seconds": None if row.lag is None else round(row.lag, 3),
                    "paused": row.paused,
                    "paused_at": row.paused_at.isoformat() if row.paused_at else None,
                    "paused_by": row.paused_by or None,
                    "served": self.served(row.name),
                }
                for row in self.queues
            ],
            "unknown_jobs": [
                {
                    "name": unknown.name,
                    "queue": unknown.queue,
                    "ready": unknown.count,
                    "dead_letter_at": unknown.dead_letter_at.isoformat(),
                }
                for unknown in self.unknown
            ],
            "flow": self.flow.as_json(),
            "workflows": self.workflows.as_json(self.checked_at),
            "failure_causes": [cause.as_json() for cause in self.causes],
            "oldest_transaction": self.long_transactions.as_json() if self.long_transactions else None,
            "running_jobs": self.running.as_json(self.checked_at) if self.running else None,
            "workers": {
                "live": len(self.workers),
                "threads": sum(worker.concurrency for worker in self.workers),
                "processes": [
                    {
                        "id": worker.id,
                        "hostname": worker.hostname,
                        "pid": worker.pid,
                        "queues": worker.queues,
                        "threads": worker.concurrency,
                        "heartbeat_at": worker.heartbeat_at.isoformat(),
                    }
                    for worker in self.workers
                ],
            },
        }


def read_status(
    queues: list[str] | None = None,
    using: str = "default",
    hand_backs: bool = True,
    with_causes: bool = False,
    long_transaction_after: float | None = None,
    with_running: bool = False,
) -> Status:
    """The queues (all, or those named) and the live workers, by the database clock.

    With `hand_backs` False, the jobs handed back as unknown are neither counted nor named
    (queue_stats.queue_rows()): what the database gauges leave out to read no job row.
    With `with_causes`, the most frequent causes of the dead letters too (dbjobs_status); with
    `long_transaction_after`, the transactions holding back the cleanup of dead rows; with
    `with_running`, the longest running jobs and their progress (operations/running_jobs.py).
    """
    rows = queue_rows(using, hand_backs)
    dead_letters = with_causes and any(row.failed for row in rows)
    if queues:
        known = {row.name: row for row in rows}
        rows = [known.get(name) or QueueRow(name) for name in queues]
    workers = list(WorkerProcess.objects.using(using).live().order_by("hostname", "pid"))
    # The names, only where the counts say some are waiting: a second read of the ready jobs.
    handed_back = [row.name for row in rows if row.handed_back]
    unknown = unknown_jobs.waiting(using, handed_back) if handed_back else []
    flow = read_flow(using, queues or None)
    running = None
    if with_running:
        running = read_running_jobs(using, queues or None, sum(row.running for row in rows))
    return Status(
        database_clock(using),
        rows,
        workers,
        asked=queues or None,
        unknown=unknown,
        flow=flow,
        workflows=read_workflows(using),
        # Read only when there are dead letters: the index of causes, and one row per cause.
        causes=causes("count", STATUS_CAUSES, using, where=False) if dead_letters else [],
        long_transactions=(
            None if long_transaction_after is None else read_long_transactions(using, long_transaction_after)
        ),
        running=running,
    )


def judge(
    status: Status,
    lag: float | None = None,
    failed: int | None = None,
    need_workers: bool = False,
    long_transaction: float | None = None,
) -> list[str]:
    """The problems found against the thresholds given, and those always found (status.problems).

    Always: jobs a worker did not know, due jobs in a queue no live worker serves, and
    workflows that can no longer finish. A `long_transaction` is judged only where the
    status read them (read_status's `long_transaction_after`).
    A paused queue's lag is the operator's choice, not a problem: it is not judged.
    """
    problems = standing_problems(status)
    if lag is not None:
        for row in status.queues:
            if row.lag is not None and row.lag > lag and not row.paused:
                problems.append(
                    f"queue {row.name!r}: the oldest due job has waited {row.lag:.1f}s (limit {lag:g}s)"
                )
    if failed is not None and status.failed >= failed:
        problems.append(f"{status.failed} failed jobs (dead letters; limit: fewer than {failed})")
    if need_workers and not status.serving:
        which = f" serving {', '.join(status.asked)}" if status.asked else ""
        problems.append(f"no live worker{which} (no heartbeat within DBJOBS_HEARTBEAT_TIMEOUT)")
    if long_transaction is not None and status.long_transactions is not None:
        problem = status.long_transactions.problem(long_transaction)
        if problem:
            problems.append(problem)
    status.problems = problems
    return problems


def standing_problems(status: Status) -> list[str]:
    """What is wrong whatever the thresholds: jobs no worker knows, queues no live worker
    serves, workflows stuck for ever."""
    problems = [
        f"job {unknown.name!r} (queue {unknown.queue!r}): {unknown.count} ready jobs that a worker did "
        f"not know; dead-lettered from {unknown.dead_letter_at:%Y-%m-%d %H:%M:%S} UTC unless a worker "
        "that knows it runs them (see the worker's log)"
        for unknown in status.unknown
    ]
    served = sorted({queue for worker in status.workers for queue in worker.queues})
    for row in status.queues:
        if status.unserved(row):
            why = f"live workers serve {', '.join(served)}" if status.workers else "no live worker at all"
            problems.append(f"queue {row.name!r}: {row.due} due jobs and no live worker serves it ({why})")
    problems.extend(item.message for item in status.workflows.stuck)
    return problems
