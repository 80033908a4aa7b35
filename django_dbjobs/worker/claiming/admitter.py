"""Admitter: a worker's admissions of keyed jobs (admission.py), driven by its loop."""

from __future__ import annotations

import logging
import threading
import time

from django.db import transaction

from ... import db
from ...exceptions import MissingMigrations
from ...flow.admission import ADMISSIONS_PER_LOOK, HOLDING, KEYS_PER_LOOK, admit_key, waiting_keys
from ...models import Blocked, Job, JobStatus

logger = logging.getLogger("django_dbjobs")


class Admitter:
    """A worker's admissions: at once for the keys whose jobs it just finished, and a look at
    every key (new jobs, other workers' ends, the sweep's recoveries) at most every
    LOOK_INTERVAL, when its loop turns, and when it is woken.

    `freed()` may be called from any thread; the worker's loop calls admit_if_due().
    """

    #: Seconds between looks at every key: other workers admit what they free themselves,
    #: and a worker woken by new jobs looks at once; this catches the rest (new jobs while
    #: every worker is busy, the sweep, an admin retry) within a second.
    LOOK_INTERVAL = 1.0

    def __init__(self, using: str, outage, scope):
        self.using = using
        #: The worker's outage policy (db.outage.Outage): an outage pauses the loop once.
        self.outage = outage
        #: Returns the Scope of the jobs this worker may admit (its queues, less the paused ones).
        self.scope = scope
        self._freed: set[str] = set()
        self._lock = threading.Lock()
        self._next_look = 0.0
        #: Where the next look starts: it goes on from the last key admitted.
        self._after = ""
        self.admitted = 0

    def freed(self, key: str) -> None:
        """A job of `key` ended here: admit its next one on the loop's next turn."""
        with self._lock:
            self._freed.add(key)

    def look_now(self) -> None:
        """Make the next admit_if_due() a look at every key (the loop was woken: new jobs)."""
        self._next_look = 0.0

    def admit_if_due(self) -> int:
        """Admit for freed keys now, and for every key when a look is due; return how many."""
        with self._lock:
            freed, self._freed = self._freed, set()
        now = time.monotonic()
        look = now >= self._next_look
        if not freed and not look:
            return 0
        if look:
            self._next_look = now + self.LOOK_INTERVAL
        try:
            admitted = self.outage.call(lambda: self._admit(sorted(freed), look), "admitting jobs", once=True)
        except MissingMigrations:
            raise
        except Exception:  # noqa: BLE001 - not an outage, yet the loop must go on
            logger.exception("Unexpected error while admitting jobs with concurrency keys")
            return 0  # the next look, a second from now, tries every key again
        if admitted is None:  # an outage (waited out once): the freed keys and a look, next turn
            with self._lock:
                self._freed |= freed
            self._next_look = 0.0
            return 0
        self.admitted += admitted
        return admitted

    def _admit(self, freed: list[str], look: bool) -> int:
        scope = self.scope()
        admitted = sum(admit_key(key, self.using, scope) for key in freed)
        if not look:
            return admitted
        if scope.paused:  # admitted before their queue was paused: they give their slots back
            unclaimable = Job.objects.using(self.using).filter(
                status=JobStatus.READY,
                blocked__in=HOLDING,
                concurrency_key__isnull=False,
                queue__in=scope.paused,
            )
            with transaction.atomic(using=self.using):  # rows a claim holds are skipped, not waited for
                pks = list(db.lock_or_skip(unclaimable.order_by()).values_list("pk", flat=True)[:1000])
                if pks:
                    unclaimable.filter(pk__in=pks).update(blocked=Blocked.CONCURRENCY)
        rows = waiting_keys(self.using, self._after, scope)
        done, last = 0, self._after
        for key, held, limit in rows:
            if limit is not None and held < limit and key not in freed:
                if done == ADMISSIONS_PER_LOOK:  # enough for one turn: the next look goes on from here
                    self._after, self._next_look = last, 0.0
                    return admitted
                admitted += admit_key(key, self.using, scope)
                done += 1
            last = key
        # Walked to the end: the next look starts from the first key again.
        self._after = last if len(rows) == KEYS_PER_LOOK else ""
        return admitted
