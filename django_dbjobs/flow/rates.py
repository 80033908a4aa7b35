"""Rate limits per queue: at most N job starts per period, shared by every worker.

``DBJOBS_QUEUE_LIMITS = {"emails": {"rate": "100/m"}}``. A rate-limited queue has N
rows in the RateSlot table (models.flow), each stamped when a claim uses it. Its jobs
wait outside the claim index (``blocked = RATE``, on an index of their own), so no other
claim reads its backlog. A claim from the queue takes, in one transaction, the slots
last used a whole period ago (FOR UPDATE SKIP LOCKED: workers never wait on each other),
claims that many of its jobs at most, and stamps the slots it used by the database
clock. Each slot is used at most once per period, so no window of one period ever holds
more than N claims, whatever the number of workers; jobs over the rate wait READY and
start as slots come free.
"""

from __future__ import annotations

import datetime
import re
import time
from dataclasses import dataclass

from django.db import transaction
from django.db.models.functions import Now

from .. import db
from ..conf import settings
from ..db.claim_locked import claim_locked
from ..models import Blocked, Isolation, Job, JobStatus, RateSlot
from ..models.queue import QUEUE_NAME
from ..models.states import CLAIM_ORDER, rated_queues

#: "100/m", "20/10s", "5000/h", "1/2.5s".
RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)?\s*(s|m|h|d)\s*\Z")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
#: Most starts per period a queue may be limited to (one row each).
MAX_RATE = 10_000
#: Batches of waiting jobs one pass of sync_blocked() moves at most, each way.
SYNC_ROUNDS = 50


@dataclass(frozen=True)
class Rate:
    """At most `count` starts in any window of `period` seconds."""

    count: int
    period: float

    @classmethod
    def parse(cls, text: object) -> Rate:
        """Read "N/unit" or "N/<number><unit>" (units s, m, h, d); ValueError names the problem."""
        match = RATE.match(text) if isinstance(text, str) else None
        if match is None:
            raise ValueError(
                f"rate must look like '100/m' or '20/10s' (starts per period; units s, m, h, d), not {text!r}"
            )
        count, number, unit = match.groups()
        period = float(number or 1) * UNITS[unit]
        if not 1 <= int(count) <= MAX_RATE or period <= 0:
            raise ValueError(f"rate must allow 1 to {MAX_RATE} starts in a period above 0 s, not {text!r}")
        return cls(int(count), period)

    def __str__(self) -> str:
        return f"{self.count}/{self.period:g}s"

    @property
    def reuse_after(self) -> float:
        """Seconds before a slot is used again: the period, and a margin for the time between
        a claim's stamp and its job's start (a thread taking it), so that starts, not only
        claims, stay within the rate."""
        return self.period + min(1.0, self.period * 0.05)


def setting_problems(value: object) -> list[str]:
    """What is wrong with a DBJOBS_QUEUE_LIMITS value, one sentence each (check dbjobs.E031)."""
    if not isinstance(value, dict):
        return [f"DBJOBS_QUEUE_LIMITS must be a dict of queue names to limits, not {value!r}."]
    problems = []
    for queue, limits in value.items():
        if not isinstance(queue, str) or not QUEUE_NAME.match(queue):
            problems.append(f"DBJOBS_QUEUE_LIMITS: {queue!r} is not a queue name.")
        elif not isinstance(limits, dict) or set(limits) - {"rate"}:
            problems.append(
                f"DBJOBS_QUEUE_LIMITS[{queue!r}] must be a dict with the key 'rate', not {limits!r}."
            )
        else:
            try:
                Rate.parse(limits.get("rate"))
            except ValueError as exc:
                problems.append(f"DBJOBS_QUEUE_LIMITS[{queue!r}]: {exc}.")
    return problems


def queue_rates() -> dict[str, Rate]:
    """The rate of each rate-limited queue, from DBJOBS_QUEUE_LIMITS (checked by dbjobs.E031)."""
    if _rates is None:
        # The same queues as the jobs' own state says (models.states.rated_queues()).
        rates = {queue: Rate.parse(settings.QUEUE_LIMITS[queue]["rate"]) for queue in rated_queues()}
        globals()["_rates"] = rates
    return _rates


_rates: dict[str, Rate] | None = None
settings.on_reload(lambda: globals().__setitem__("_rates", None))


def slots_in_use(queue: str, rate: Rate, using: str) -> int:
    """Starts of `queue` in the last period (dbjobs_status, the admin)."""
    since = Now() - datetime.timedelta(seconds=rate.period)
    return RateSlot.objects.using(using).filter(queue=queue, number__lt=rate.count, used_at__gt=since).count()


class RateLimitedClaims:
    """A worker's claims from its rate-limited queues (its main thread).

    After a claim that found no free slot, or no job, the queue is left alone for a
    moment (EXHAUSTED_GAP, EMPTY_GAP): a worker busy with other queues must not run a
    transaction for it on every turn.
    """

    EMPTY_GAP = 0.1
    EXHAUSTED_GAP = 0.25

    def __init__(self, worker_id: str, using: str):
        self.worker_id = worker_id
        self.using = using
        self._next_try: dict[str, float] = {}
        self._made: set[tuple[str, int]] = set()
        self._empty: set[str] = set()  # left alone because they had no job
        #: Queues whose claim without `include_waiting` passed over a due job that must run
        #: alone: the worker holds nothing for a moment, so that its next claim takes it.
        self.alone_due: set[str] = set()

    def claim(self, queue: str, rate: Rate, limit: int, include_waiting: bool) -> list[Job]:
        """Claim up to `limit` jobs of `queue`, no more than its free slots; stamp the slots used.

        A job that must run alone is claimed only with `include_waiting`, and by itself;
        without, one passed over sets `alone_due`.
        """
        now = time.monotonic()
        if limit <= 0 or now < self._next_try.get(queue, 0.0):
            return []
        self._make_slots(queue, rate)
        using = self.using
        since = Now() - datetime.timedelta(seconds=rate.reuse_after)
        with transaction.atomic(using=using):
            # In slot order, not by last use: on MySQL a locking read that sorts would lock
            # every free slot, and the other workers' claims would find none.
            free = RateSlot.objects.using(using).filter(
                queue=queue, number__lt=rate.count, used_at__lte=since
            )
            slots = list(db.lock_or_skip(free.order_by("number")).values_list("pk", flat=True)[:limit])
            if not slots:
                self._next_try[queue] = now + min(self.EXHAUSTED_GAP, rate.period / rate.count)
                self._empty.discard(queue)
                return []
            due = Job.objects.using(using).filter(
                status=JobStatus.READY, blocked=Blocked.RATE, queue=queue, run_at__lte=Now()
            )
            picked = list(
                db.lock_or_skip(due.order_by(*CLAIM_ORDER)).values_list("pk", "isolation")[: len(slots)]
            )
            alone = [pk for pk, isolation in picked if isolation != Isolation.NONE]
            others = [pk for pk, isolation in picked if isolation == Isolation.NONE]
            if alone and not include_waiting:
                self.alone_due.add(queue)
            elif include_waiting:
                self.alone_due.discard(queue)
            # A job that must run alone is claimed by itself: jobs beside it would wait at its
            # gate, their slots stamped (the rate counts starts).
            jobs = claim_locked(
                Job, using, self.worker_id, alone[:1] if alone and include_waiting else others
            )
            if jobs:
                RateSlot.objects.using(using).filter(pk__in=slots[: len(jobs)]).update(used_at=Now())
        if not jobs and queue not in self.alone_due:  # one passed over is due: no gap
            self._next_try[queue] = now + self.EMPTY_GAP
            self._empty.add(queue)
        return jobs

    def _make_slots(self, queue: str, rate: Rate) -> None:
        """Make the queue's slot rows once per process (their own statement: see admission.py)."""
        if (queue, rate.count) in self._made:
            return
        rows = [RateSlot(queue=queue, number=number) for number in range(rate.count)]
        RateSlot.objects.using(self.using).bulk_create(rows, ignore_conflicts=True, batch_size=1000)
        self._made.add((queue, rate.count))

    def woken(self) -> None:
        """New jobs may have come: try the queues that had none on the next claim."""
        for queue in self._empty:
            self._next_try.pop(queue, None)
        self._empty.clear()


def sync_blocked(using: str, batch_size: int = 1000) -> int:
    """Make the READY jobs of the rate-limited queues wait for the rate, and free the others.

    For jobs enqueued, or admitted to their key's slot, while the setting said otherwise
    (a rate added, or removed; a worker still on the old settings): a worker does it when
    it starts and every minute. Rows another transaction holds (an
    enqueue not committed yet) are skipped, never waited for: the next pass gets them.
    Return how many jobs changed.
    """
    rated = rated_queues()
    ready = Job.objects.using(using).filter(status=JobStatus.READY)
    moves = [(ready.filter(blocked=Blocked.RATE).exclude(queue__in=rated), Blocked.NONE)]
    if rated:
        # Keyed jobs too: an admitted keyed job (NONE) holds its key's slot, and in a
        # rate-limited queue only the claims within the rate take it (RATE holds it as well).
        free = ready.filter(blocked=Blocked.NONE, queue__in=rated)
        moves.append((free, Blocked.RATE))
    changed = 0
    for jobs, blocked in moves:
        for _ in range(SYNC_ROUNDS):  # a short transaction each; a backlog larger waits a minute more
            with transaction.atomic(using=using):
                pks = list(db.lock_or_skip(jobs.order_by()).values_list("pk", flat=True)[:batch_size])
                if pks:
                    changed += jobs.filter(pk__in=pks).update(blocked=blocked)
            if len(pks) < batch_size:
                break
    return changed
