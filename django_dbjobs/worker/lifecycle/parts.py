"""Parts: the pieces a worker's loop drives, built and wired together in one place.

Each part receives what it uses (an Identity, events, callbacks), never the Worker, so
each can be read and tested alone; assemble() is the one place that knows them all.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ...db.outage import Outage
from ...flow.admission import Scope
from ...models import Job
from ..claiming.admitter import Admitter
from ..claiming.claimer import Claimer
from ..claiming.held import HeldJobs
from ..claiming.prefetch import Prefetch
from ..identity import DatabaseErrors, Identity
from ..leases.lease import Lease
from ..leases.reconcile import Reconciler
from ..running import deadlines
from ..running.cancel_watch import CancelWatch
from ..running.job_threads import JobThreads
from ..running.progress_writer import ProgressWriter
from ..running.success_batch import SuccessBatch
from .wake_event import WakeEvent


@dataclass
class Parts:
    """A worker's parts. `wake` ends the loop's wait, whoever sets it (see Worker)."""

    identity: Identity
    wake: WakeEvent
    forced: threading.Event
    errors: DatabaseErrors
    held: HeldJobs
    prefetch: Prefetch
    outage: Outage
    lease: Lease
    acks: SuccessBatch
    threads: JobThreads
    claimer: Claimer
    admitter: Admitter
    cancels: CancelWatch
    progress: ProgressWriter
    reconciler: Reconciler
    #: Stuck jobs with a concurrency key, recorded at the end of the shutdown (stuck.py).
    stuck: list = field(default_factory=list)


def assemble(
    identity: Identity,
    *,
    concurrency: int,
    max_jobs: int | None,
    prefetch: Prefetch,
    poll_interval: float,
    on_database_error: Callable[[], None],
    on_done: Callable[[Job, float | None], None],
    on_not_stored: Callable[[], None],
) -> Parts:
    """Build a worker's parts; `on_database_error` hears of the loop's and heartbeat's outages."""
    wake, forced, errors, held = WakeEvent(), threading.Event(), DatabaseErrors(), HeldJobs()
    outage = Outage(
        identity.using, on_error=on_database_error, forced=forced, wake=wake, looks_at=deadlines.looks_at
    )
    lease = Lease(identity, wake)
    acks = SuccessBatch(identity.id, identity.using, wake, outage, on_not_stored=on_not_stored)
    claimer: Claimer | None = None
    threads = JobThreads(
        identity,
        concurrency,
        lease=lease,
        on_success=acks.add,
        on_done=on_done,
        on_not_stored=on_not_stored,
        errors=errors,
        wake=wake,
        forced=forced,
        claims_came_short=lambda: claimer.came_short,
    )
    claimer = Claimer(
        identity,
        concurrency=concurrency,
        max_jobs=max_jobs,
        prefetch=prefetch,
        held=held,
        threads=threads,
        lease=lease,
        acks=acks,
        outage=outage,
        forced=forced,
        poll_interval=poll_interval,
    )
    paused = claimer.paused
    queues = identity.queues or None
    admitter = Admitter(identity.using, outage, lambda: Scope(queues, paused.names))
    cancels = CancelWatch(identity, held, outage, lease)
    progress = ProgressWriter(identity, held, outage)
    reconciler = Reconciler(identity, outage, held=held, pending=acks.pending_ids)
    return Parts(
        identity,
        wake,
        forced,
        errors,
        held,
        prefetch,
        outage,
        lease,
        acks,
        threads,
        claimer,
        admitter,
        cancels,
        progress,
        reconciler,
    )
