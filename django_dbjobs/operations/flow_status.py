"""Flow control as dbjobs_status and the admin show it: keys at their limit, rate use, stop requests.

Reads the keyed-jobs index (only jobs with a concurrency key), the rate slots of the
rate-limited queues, and the running-jobs index: never the finished jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count, Max, Q

from ..flow.admission import HOLDING
from ..flow.rates import Rate, queue_rates, slots_in_use
from ..models import Blocked, Job, JobStatus

#: Keys shown, those with the most jobs waiting first.
MAX_KEYS_SHOWN = 20


@dataclass
class KeyRow:
    """A concurrency key at its limit, with jobs waiting for one of its slots."""

    key: str
    limit: int
    running: int
    #: Admitted and about to be claimed: they hold slots too.
    admitted: int
    waiting: int


@dataclass
class RateRow:
    queue: str
    rate: Rate
    #: Starts in the last period.
    used: int


@dataclass
class FlowStatus:
    keys_at_limit: list[KeyRow] = field(default_factory=list)
    #: Keys at their limit beyond those listed.
    more_keys: int = 0
    rates: list[RateRow] = field(default_factory=list)
    #: Running jobs asked to stop that have not stopped yet.
    stopping: int = 0

    def as_json(self) -> dict:
        return {
            "keys_at_limit": [
                {
                    "key": k.key,
                    "limit": k.limit,
                    "running": k.running,
                    "admitted": k.admitted,
                    "waiting": k.waiting,
                }
                for k in self.keys_at_limit
            ],
            "more_keys_at_limit": self.more_keys,
            "rate_limits": [
                {
                    "queue": r.queue,
                    "rate": str(r.rate),
                    "period_seconds": r.rate.period,
                    "limit": r.rate.count,
                }
                | {"used_in_last_period": r.used}
                for r in self.rates
            ],
            "cancel_requested_running": self.stopping,
        }

    def lines(self) -> list[str]:
        """The flow control part of dbjobs_status's table; nothing when nothing is limited."""
        text = []
        for row in self.keys_at_limit:
            text.append(
                f"Key {row.key!r} at its limit: {row.running + row.admitted}/{row.limit} in use, "
                f"{row.waiting} waiting"
            )
        if self.more_keys:
            text.append(f"... and {self.more_keys} more keys at their limit")
        for row in self.rates:
            text.append(
                f"Queue {row.queue!r} rate {row.rate}: {row.used}/{row.rate.count} used in the last period"
            )
        if self.stopping:
            text.append(f"Running jobs asked to stop: {self.stopping}")
        return text


def read_flow(using: str = "default", queues: list[str] | None = None) -> FlowStatus:
    jobs = Job.objects.using(using)
    active = jobs.filter(
        concurrency_key__isnull=False,
        status__in=[JobStatus.READY, JobStatus.RUNNING],
        blocked__in=[*HOLDING, Blocked.CONCURRENCY],  # on MySQL's index, which has no status
    )
    keys = (
        active.values("concurrency_key")
        .annotate(
            running=Count("pk", filter=Q(status=JobStatus.RUNNING)),
            admitted=Count("pk", filter=Q(status=JobStatus.READY, blocked__in=HOLDING)),
            waiting=Count("pk", filter=Q(blocked=Blocked.CONCURRENCY)),
            limit=Max("concurrency_limit"),
        )
        .order_by()
    )
    full = [
        KeyRow(k["concurrency_key"], k["limit"], k["running"], k["admitted"], k["waiting"])
        for k in keys
        if k["waiting"] and k["running"] + k["admitted"] >= k["limit"]
    ]
    full.sort(key=lambda row: (-row.waiting, row.key))
    rates = [
        RateRow(queue, rate, slots_in_use(queue, rate, using))
        for queue, rate in sorted(queue_rates().items())
        if not queues or queue in queues
    ]
    stopping = jobs.running().filter(cancel_requested_at__isnull=False)
    if queues:
        stopping = stopping.filter(queue__in=queues)
    return FlowStatus(full[:MAX_KEYS_SHOWN], max(len(full) - MAX_KEYS_SHOWN, 0), rates, stopping.count())
