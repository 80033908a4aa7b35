"""Reconciler: what the database says a worker owns against what it holds, every sweep interval."""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable

from django.db.models.functions import Now

from ...conf import settings
from ...db.outage import Outage
from ...exceptions import MissingMigrations
from ...models import Job
from ...observability import log_fields
from ..claiming.held import HeldJobs
from ..identity import Identity
from ..running import cancel_watch

logger = logging.getLogger("django_dbjobs")

#: Seconds since its claim, by the database clock, before a job not held is given back.
#: The main thread holds what it claims in the same turn and reconciles between turns, so
#: none of its claims is missed; the margin keeps it so for a claim read later than that.
UNHELD_AFTER = 5.0


class Reconciler:
    """Give back, every DBJOBS_SWEEP_INTERVAL, the jobs RUNNING under this worker that it does not hold.

    Claimer.release_unheld() gives them back right after a claim that failed, but such a
    claim can commit later still (a PostgreSQL LISTEN connection broken mid-claim: the
    server runs on) and nothing tells the worker when. Its jobs are then RUNNING under a
    live, heartbeating worker, and no sweep takes them. `pending()` gives the ids of the
    successes waiting in the batch (HeldJobs.kept()).
    One SELECT on the running-jobs index per interval; an UPDATE only for what it finds.
    """

    def __init__(
        self,
        identity: Identity,
        outage: Outage,
        *,
        held: HeldJobs,
        pending: Callable[[], set[str]],
    ):
        self.identity = identity
        self.outage = outage
        self.held = held
        self.pending = pending
        self._next = 0.0

    def reconcile_if_due(self) -> int | None:
        """reconcile() when due; how many jobs went back, None if not due or it failed."""
        now = time.monotonic()
        if now < self._next:
            return None
        self._next = now + settings.SWEEP_INTERVAL
        try:
            return self.outage.call(self.reconcile, "giving back jobs not held", once=True)
        except MissingMigrations:
            raise
        except Exception:  # noqa: BLE001 - not an outage, yet the loop must go on
            logger.exception("Unexpected error while giving back jobs not held id=%s", self.identity.id)
            return None

    def reconcile(self) -> int:
        """Give back the jobs this worker owns and does not hold, claimed UNHELD_AFTER ago or more."""
        worker = self.identity
        jobs = Job.objects.using(worker.using)
        claimed_before = Now() - datetime.timedelta(seconds=UNHELD_AFTER)
        owned = jobs.owned_by(worker.id).filter(last_attempted_at__lt=claimed_before).order_by()
        found = list(owned.only("id", "pickups"))
        if not found:
            return 0
        kept = self.held.kept(self.pending)
        # Fenced on owner, RUNNING and pickup: one that finished since the SELECT stays as it is.
        released, cancelled = jobs.give_back(worker.id, [job for job in found if job.pk not in kept])
        if released or cancelled:
            count = released + len(cancelled)
            logger.warning(
                "Jobs this worker did not hold released count=%s id=%s",
                count,
                worker.id,
                extra=log_fields.for_count(count),
            )
        cancel_watch.report_cancelled(worker.using, [job.pk for job in cancelled])  # asked to stop
        return released + len(cancelled)
