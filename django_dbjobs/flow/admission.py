"""Admission: give waiting keyed jobs their key's free slots, never more than its limit.

A job with a concurrency key is stored waiting (``blocked = CONCURRENCY``), outside the
claim index. Admitting it makes it claimable (``blocked = ''``). The slots a key holds
are its admitted jobs: READY and admitted, or RUNNING. Every write that makes a running
job READY again (a retry, a release, the sweep) makes it wait again (models.states
blocked_if_keyed()), and a finished job holds nothing: so no end of a run can forget
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

from django.db import connections, transaction
from django.db.models.functions import Now

from ..db.admission_sql import admissible_keys_sql
from ..exceptions import MissingMigrations
from ..models import Blocked, ConcurrencyKey, Job, JobStatus
from ..models.states import CLAIM_ORDER

logger = logging.getLogger("django_dbjobs")

#: Most keys one admission pass looks at; the next pass goes on.
KEYS_PER_PASS = 100


def admissible_keys(using: str, limit: int = KEYS_PER_PASS) -> list[str]:
    """Keys with a due job waiting and a free slot for it, in key order (one statement)."""
    with connections[using].cursor() as cursor:
        cursor.execute(admissible_keys_sql(Job, using), [limit])
        return [row[0] for row in cursor.fetchall()]


def admit_key(key: str, using: str) -> int:
    """Admit the due jobs of `key` its free slots allow, in claim order; return how many.

    One short transaction, holding the key's lock row while it counts and admits. A
    key's first admission makes its lock row first, in a statement of its own: two
    transactions inserting the same row and then locking it would deadlock on MySQL.
    """
    for _ in range(2):
        admitted = _admit_locked(key, using)
        if admitted is not None:
            return admitted
        ConcurrencyKey.objects.using(using).bulk_create([ConcurrencyKey(key=key)], ignore_conflicts=True)
    return 0  # deleted again at once by the retention pass: the next pass admits


def _admit_locked(key: str, using: str) -> int | None:
    """admit_key() under the key's lock row; None when the key has no lock row yet."""
    jobs = Job.objects.using(using)
    with transaction.atomic(using=using):
        if not ConcurrencyKey.objects.using(using).select_for_update().filter(key=key).exists():
            return None
        keyed = jobs.filter(concurrency_key=key)
        held = keyed.filter(status__in=[JobStatus.READY, JobStatus.RUNNING], blocked=Blocked.NONE).count()
        waiting = keyed.filter(status=JobStatus.READY, blocked=Blocked.CONCURRENCY, run_at__lte=Now())
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
        return waiting.filter(pk__in=admit).update(blocked=Blocked.NONE) if admit else 0


def admit(using: str, keys: list[str] | None = None) -> int:
    """Admit what the free slots allow, for `keys` or for every key that can take a job now."""
    admitted = 0
    for key in admissible_keys(using) if keys is None else keys:
        admitted += admit_key(key, using)
    return admitted


def prune_idle_keys(using: str, batch_size: int = 1000) -> int:
    """Delete up to `batch_size` lock rows of keys no READY or RUNNING job has; return how many.

    A key used again later gets its row back at its first admission (admit_key()).
    """
    active = Job.objects.using(using).filter(
        concurrency_key__isnull=False, status__in=[JobStatus.READY, JobStatus.RUNNING]
    )
    keys = active.values("concurrency_key")
    locks = ConcurrencyKey.objects.using(using)
    idle = list(locks.exclude(key__in=keys).values_list("key", flat=True)[:batch_size])
    if not idle:
        return 0
    return locks.filter(key__in=idle).exclude(key__in=keys).delete()[0]


class Admitter:
    """A worker's admissions: at once for the keys whose jobs it just finished, and every
    PASS_INTERVAL for every key (new jobs, other workers' ends, the sweep's recoveries).

    `freed()` may be called from any thread; the worker's loop calls admit_if_due().
    """

    #: Seconds between passes over every key; a key's first job waits this long at most.
    PASS_INTERVAL = 0.2

    def __init__(self, using: str, outage):
        self.using = using
        #: The worker's outage policy (db.outage.Outage): an outage pauses the loop once.
        self.outage = outage
        self._freed: set[str] = set()
        self._lock = threading.Lock()
        self._next_pass = 0.0
        self.admitted = 0

    def freed(self, key: str) -> None:
        """A job of `key` ended here: admit its next one on the loop's next turn."""
        with self._lock:
            self._freed.add(key)

    def pending(self) -> bool:
        with self._lock:
            return bool(self._freed)

    def admit_if_due(self) -> int:
        """Admit for freed keys now, and for every key when a pass is due; return how many."""
        with self._lock:
            freed, self._freed = self._freed, set()
        now = time.monotonic()
        full = now >= self._next_pass
        if not freed and not full:
            return 0
        if full:
            self._next_pass = now + self.PASS_INTERVAL
        keys = None if full else sorted(freed)
        try:
            admitted = self.outage.call(lambda: admit(self.using, keys), "admitting jobs", once=True)
        except MissingMigrations:
            raise
        except Exception:  # noqa: BLE001 - not an outage, yet the loop must go on
            logger.exception("Unexpected error while admitting jobs with concurrency keys")
            admitted = None
        if admitted is None:  # look at every key on the next pass
            self._next_pass = 0.0
            return 0
        self.admitted += admitted
        return admitted

    def look_now(self) -> None:
        """Make the next admit_if_due() a pass over every key (the loop was woken: new jobs)."""
        self._next_pass = 0.0
