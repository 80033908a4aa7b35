"""Admission: give waiting keyed jobs their key's free slots, never more than its limit.

A job with a concurrency key is stored waiting (``blocked = CONCURRENCY``), outside the
claim index. Admitting it makes it claimable (``blocked = ''``). The slots a key holds
are its admitted jobs: READY and admitted (``blocked`` NONE, or RATE in a rate-limited
queue), or RUNNING. Every write that makes a running
job READY again (a retry, a release, the sweep) makes it wait again (models.states
blocked_again()), and a finished job holds nothing: so no end of a run can forget
to give its slot back, and a dead worker's slots come back with its jobs (the sweep,
within the lease bound).

Admissions of one key take turns on its lock row (models.ConcurrencyKey, locked FOR
UPDATE), so two workers never both count a free slot and fill it twice: the database
enforces the limit, not a worker's memory.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from django.db import connections, transaction
from django.db.models import Case, CharField, Count, Max, Value, When
from django.db.models.functions import Now

from .. import db
from ..db.admission_sql import waiting_keys_sql
from ..exceptions import MissingMigrations
from ..models import Blocked, ConcurrencyKey, Job, JobStatus
from ..models.states import CLAIM_ORDER, rated_queues

logger = logging.getLogger("django_dbjobs")

#: The ``blocked`` values of a keyed job that holds a slot of its key: admitted, or claimed.
HOLDING = (Blocked.NONE, Blocked.RATE)


def admitted_blocked():
    """The ``blocked`` value of an admitted job: claimable, within its queue's rate if it has one."""
    rated = rated_queues()
    if not rated:
        return Value(Blocked.NONE)
    return Case(
        When(queue__in=rated, then=Value(Blocked.RATE)), default=Value(Blocked.NONE), output_field=CharField()
    )


#: Keys one look walks at most (one index seek each); the next look goes on from there.
KEYS_PER_LOOK = 500
#: Keys one look admits jobs for at most (a short transaction each); the next look goes on.
ADMISSIONS_PER_LOOK = 20


@dataclass(frozen=True)
class Scope:
    """The jobs a worker admits: those of the queues it serves (None: every queue), not paused.

    A job admitted in a queue nobody claims from would hold its key's slot meanwhile.
    """

    queues: tuple[str, ...] | None = None
    paused: frozenset[str] = frozenset()

    def narrow(self, jobs):
        if self.queues:
            jobs = jobs.filter(queue__in=self.queues)
        return jobs.exclude(queue__in=self.paused) if self.paused else jobs


def waiting_keys(using: str, after: str = "", scope: Scope = Scope(), limit: int = KEYS_PER_LOOK):
    """[(key, slots in use, highest limit of its due waiting jobs in `scope`, or None)] for up
    to `limit` keys with jobs waiting, after `after`, in key order (three statements)."""
    with connections[using].cursor() as cursor:
        cursor.execute(waiting_keys_sql(Job, using), [after, limit])
        keys = [row[0] for row in cursor.fetchall()]
    if not keys:
        return []
    jobs = Job.objects.using(using).filter(concurrency_key__in=keys).order_by()
    held = dict(
        jobs.filter(status__in=[JobStatus.READY, JobStatus.RUNNING], blocked__in=HOLDING)
        .values_list("concurrency_key")
        .annotate(n=Count("pk"))
    )
    due = scope.narrow(jobs.filter(status=JobStatus.READY, blocked=Blocked.CONCURRENCY, run_at__lte=Now()))
    limits = dict(due.values_list("concurrency_key").annotate(limit=Max("concurrency_limit")))
    return [(key, held.get(key, 0), limits.get(key)) for key in keys]


def admissible_keys(using: str, scope: Scope = Scope()) -> list[str]:
    """Every key with a due job waiting (in `scope`) and a free slot for it, in key order."""
    found, after = [], ""
    while True:
        rows = waiting_keys(using, after, scope)
        found += [key for key, held, limit in rows if limit is not None and held < limit]
        if len(rows) < KEYS_PER_LOOK:
            return found
        after = rows[-1][0]


def admit_key(key: str, using: str, scope: Scope = Scope()) -> int:
    """Admit the due jobs of `key` (in `scope`) its free slots allow, in claim order; return how many.

    One short transaction, holding the key's lock row while it counts and admits; a key
    another worker is admitting right now is skipped (it admits what is free). A key's
    first admission makes its lock row first, in a statement of its own: two
    transactions inserting the same row and then locking it would deadlock on MySQL.
    """
    for _ in range(2):
        admitted = _admit_locked(key, using, scope)
        if admitted is not None:
            return admitted
        ConcurrencyKey.objects.using(using).bulk_create([ConcurrencyKey(key=key)], ignore_conflicts=True)
    return 0  # locked by another worker, or deleted again at once by the retention pass


def _admit_locked(key: str, using: str, scope: Scope) -> int | None:
    """admit_key() under the key's lock row; None when the row is missing or locked elsewhere."""
    jobs = Job.objects.using(using)
    with transaction.atomic(using=using):
        lock = ConcurrencyKey.objects.using(using).filter(key=key)
        if not db.lock_or_skip(lock).exists():
            return None
        keyed = jobs.filter(concurrency_key=key)
        held = keyed.filter(status__in=[JobStatus.READY, JobStatus.RUNNING], blocked__in=HOLDING).count()
        waiting = scope.narrow(
            keyed.filter(status=JobStatus.READY, blocked=Blocked.CONCURRENCY, run_at__lte=Now())
        )
        in_order = waiting.order_by(*CLAIM_ORDER)
        limit = next(iter(in_order.values_list("concurrency_limit", flat=True)[:1]), None)
        if limit is None or held >= limit:
            return 0
        admit = []
        for pk, job_limit in in_order.values_list("pk", "concurrency_limit")[: limit - held]:
            if held >= job_limit:
                break
            admit.append(pk)
            held += 1
        # Claimable now; in a rate-limited queue, by the claims within its rate.
        return waiting.filter(pk__in=admit).update(blocked=admitted_blocked()) if admit else 0


def admit(using: str, keys: list[str] | None = None, scope: Scope = Scope()) -> int:
    """Admit what the free slots allow, for `keys` or for every key that can take a job now."""
    admitted = 0
    for key in admissible_keys(using, scope) if keys is None else keys:
        admitted += admit_key(key, using, scope)
    return admitted


def prune_idle_keys(using: str, batch_size: int = 1000) -> int:
    """Delete up to `batch_size` lock rows of keys no READY or RUNNING job has; return how many.

    Each row is locked first (skipped if an admission holds it), then its key checked
    again, in the order admissions take them (key row, then jobs), so the two never
    deadlock. A key used again later gets its row back at its first admission.
    """
    active = Job.objects.using(using).filter(
        concurrency_key__isnull=False, status__in=[JobStatus.READY, JobStatus.RUNNING]
    )
    locks = ConcurrencyKey.objects.using(using)
    idle = list(
        locks.exclude(key__in=active.values("concurrency_key")).values_list("key", flat=True)[:batch_size]
    )
    deleted = 0
    for key in idle:
        with transaction.atomic(using=using):
            if (
                not db.lock_or_skip(locks.filter(key=key)).exists()
                or active.filter(concurrency_key=key).exists()
            ):
                continue
            deleted += locks.filter(key=key).delete()[0]
    return deleted


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
            admitted = None
        if admitted is None:  # those keys are looked at again on the next look
            self._next_look = 0.0
            return 0
        self.admitted += admitted
        return admitted

    def _admit(self, freed: list[str], look: bool) -> int:
        scope = self.scope()
        admitted = sum(admit_key(key, self.using, scope) for key in freed)
        if not look:
            return admitted
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
