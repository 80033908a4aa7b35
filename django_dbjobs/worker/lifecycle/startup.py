"""Starting a worker: the checks before anything is written, then its row, heartbeat and threads."""

from __future__ import annotations

import logging
from collections.abc import Callable

from ... import db, registry
from ...conf import settings
from ...db.outage import Outage
from ...flow import rates
from ...observability import consuming, log_fields
from ...operations import known_queues
from ...schedules.scheduler import Scheduler
from ..identity import Identity
from ..leases import heartbeat
from ..leases.heartbeat import Heartbeat
from . import heap_trim, supervisor
from .idle_wait import IdleWaiter
from .parts import Parts

logger = logging.getLogger("django_dbjobs")


def check(identity: Identity, outage: Outage) -> None:
    """Import the job modules and check the database (one line if unmigrated), writing nothing."""
    registry.autodiscover()
    outage.call(lambda: db.require_migrated(identity.using), "checking the database")
    if not supervisor.supervised():  # run_jobs --processes says it once, not once per child
        known_queues.warn_unused(list(identity.queues), identity.using)
    heap_trim.trim()  # what importing and checking allocated and freed (heap_trim.py)


def start(
    parts: Parts,
    *,
    concurrency: int,
    waiter: IdleWaiter,
    scheduler: Scheduler | None,
    on_database_error: Callable[[], None],
) -> Heartbeat:
    """Sync the settings' schedules, register the worker, start its heartbeat and threads."""
    identity, outage = parts.identity, parts.outage
    consuming.install()  # traces its runs if the project set up OpenTelemetry
    if scheduler is not None:
        outage.call(scheduler.sync_settings, "syncing DBJOBS_SCHEDULES")
    moved = outage.call(lambda: rates.sync_blocked(identity.using), "applying DBJOBS_QUEUE_LIMITS")
    if moved:
        logger.info(
            "Jobs moved in or out of rate-limited queues' waiting line count=%s",
            moved,
            extra=log_fields.for_count(moved),
        )
    waiter.start()

    def register() -> None:  # again by the heartbeat, if a sweep removed the row
        heartbeat.register(identity, concurrency)

    outage.call(register, "registering the worker")
    beat = Heartbeat(
        identity.id,
        settings.HEARTBEAT_INTERVAL,
        register,
        identity.using,
        on_error=on_database_error,
        on_lost=parts.lease.lost,
    )
    parts.lease.heartbeat = beat
    beat.start()
    parts.threads.start()
    logger.info(
        "Worker started id=%s queues=%s threads=%s registered_jobs=%s prefetch_max=%s scheduler=%s"
        " wakeups=%s",
        identity.id,
        ",".join(identity.queues) or "*",
        concurrency,
        len(registry.registered()),
        parts.prefetch.most,
        "on" if scheduler is not None else "off",
        waiter.way,  # the line before says why, if it probes where LISTEN would go through a pooler
    )
    heap_trim.trim()
    return beat
