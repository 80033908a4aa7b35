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
from dataclasses import dataclass

from django.db import connections, transaction
from django.db.models import Case, CharField, Count, Max, Value, When
from django.db.models.functions import Now

from .. import db
from ..db.admission_sql import waiting_keys_sql
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
    fold = db.key_fold(using)  # MySQL compares keys by their collation: 'Sync:1' = 'sync:1'
    held = {fold(key): n for key, n in held.items()}
    limits = {fold(key): limit for key, limit in limits.items()}
    return [(key, held.get(fold(key), 0), limits.get(fold(key))) for key in keys]


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
        concurrency_key__isnull=False,
        status__in=[JobStatus.READY, JobStatus.RUNNING],
        blocked__in=[*HOLDING, Blocked.CONCURRENCY],  # on MySQL's index, which has no status
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
