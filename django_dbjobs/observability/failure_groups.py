"""The dead letters grouped by cause (their error_fingerprint): how many, since when, where, one sample.

Read through the index of dead letters by cause (``dbjobs_job_failed_cause_idx``: FAILED
rows by error_fingerprint, finished_at, id): the counts, first and last seen come from
the index alone; the sample of each cause is its newest failure (the last finished; of
those finished at once, the last enqueued), its first row backwards on the index; the job
names and queues of each cause shown come from its newest rows (NAMES_READ of them).
Retrying or deleting a cause is fenced on it: only rows still FAILED with that fingerprint
when their batch is written are changed.
"""

from __future__ import annotations

import datetime
from collections import Counter
from dataclasses import dataclass, field

from django.db.models import Count, Max, Min, Q

from ..models import FailedJob, JobStatus, RetryReport

#: The causes dbjobs_status shows, the most frequent first.
STATUS_CAUSES = 10
#: The newest dead letters of a cause whose job names and queues are counted.
NAMES_READ = 100


@dataclass
class Cause:
    """One cause of dead letters; `fingerprint` is None for those stored before causes were."""

    fingerprint: str | None
    count: int
    first_seen: datetime.datetime | None
    last_seen: datetime.datetime | None
    #: The newest failure of the cause: the last finished (of those, the last enqueued).
    sample_id: str = ""
    #: Its newest dead letters (names_read of them, NAMES_READ at most) by job name, and by
    #: queue, the most first.
    names: dict[str, int] = field(default_factory=dict)
    queues: dict[str, int] = field(default_factory=dict)
    names_read: int = 0
    #: The sample's last error.
    exception_class_path: str = ""
    summary: str = ""
    traceback: str = ""

    def as_json(self) -> dict:
        return {
            "fingerprint": self.fingerprint,
            "count": self.count,
            "first_seen": self.first_seen.isoformat() if self.first_seen else None,
            "last_seen": self.last_seen.isoformat() if self.last_seen else None,
            "sample": {
                "id": self.sample_id,
                "exception_class_path": self.exception_class_path,
                "summary": self.summary,
            },
        }


def causes(
    by: str = "last_seen", limit: int | None = None, using: str = "default", where: bool = True
) -> list[Cause]:
    """The causes of the dead letters, newest last seen first (`by` "count": the most first).

    Without `where`, the job names and queues of each cause are not read: the rest comes
    from the index and one row per cause, cheap enough for a probe.
    """
    order = ["-count", "-last_seen"] if by == "count" else ["-last_seen", "-count"]
    rows = (
        FailedJob.objects.using(using)
        .order_by()
        .values("error_fingerprint")
        .annotate(count=Count("id"), first_seen=Min("finished_at"), last_seen=Max("finished_at"))
        .order_by(*order, "error_fingerprint")
    )
    found = [
        Cause(row["error_fingerprint"], row["count"], row["first_seen"], row["last_seen"])
        for row in (rows if limit is None else rows[:limit])
    ]
    if where:
        _add_names_and_queues(found, using)
    _add_samples(found, using)
    return found


def cause(fingerprint: str | None, using: str = "default") -> Cause | None:
    """The cause with this fingerprint (its names and queues not read), or None if no dead letter has it."""
    jobs = dead_letters(fingerprint, using)
    row = jobs.aggregate(count=Count("id"), first_seen=Min("finished_at"), last_seen=Max("finished_at"))
    if not row["count"]:
        return None
    found = [Cause(fingerprint, row["count"], row["first_seen"], row["last_seen"])]
    _add_samples(found, using)
    return found[0]


def dead_letters(fingerprint: str | None, using: str = "default"):
    """The dead letters of one cause (a FailedJob queryset)."""
    return FailedJob.objects.using(using).filter(of_cause(fingerprint))


def of_cause(fingerprint: str | None) -> Q:
    """The fence of a cause's rows: its fingerprint, and FAILED."""
    if fingerprint is None:
        return Q(status=JobStatus.FAILED, error_fingerprint__isnull=True)
    return Q(status=JobStatus.FAILED, error_fingerprint=fingerprint)


def retry_cause(fingerprint: str | None, using: str = "default") -> RetryReport:
    """Queue again every dead letter of this cause, in batches, each fenced on the cause."""
    return dead_letters(fingerprint, using).retry_all(fence=of_cause(fingerprint))


def delete_cause(fingerprint: str | None, using: str = "default") -> tuple[int, int]:
    """Delete every dead letter of this cause, in batches, each fenced on the cause; (deleted, skipped)."""
    return dead_letters(fingerprint, using).delete_all(fence=of_cause(fingerprint))


#: A cause's dead letters newest first, in the index of causes' order: the fingerprint leads
#: even though it is one value, since PostgreSQL takes ``IS NULL`` (the dead letters without
#: a cause) as no equality and would otherwise sort them all.
NEWEST_FIRST = ("-error_fingerprint", "-finished_at", "-pk")


def _add_names_and_queues(found: list[Cause], using: str) -> None:
    """Count the job names and queues of each cause's newest dead letters (NAMES_READ at most).

    Read backwards through the index of causes, so a cause of a million dead letters costs
    what one of a hundred does.
    """
    for item in found:
        newest = dead_letters(item.fingerprint, using).order_by(*NEWEST_FIRST)
        rows = list(newest.values_list("name", "queue")[:NAMES_READ])
        item.names_read = len(rows)
        item.names = _most_first(Counter(name for name, _queue in rows))
        item.queues = _most_first(Counter(queue for _name, queue in rows))


def _most_first(counts: Counter) -> dict[str, int]:
    return dict(sorted(counts.items(), key=lambda pair: (-pair[1], pair[0])))


def _add_samples(found: list[Cause], using: str) -> None:
    """Read each cause's sample, its newest failure, with its last error: one row per cause,
    the first of the cause's rows backwards on the index (finished_at, then id)."""
    for item in found:
        newest = dead_letters(item.fingerprint, using).order_by(*NEWEST_FIRST)
        item.sample_id, errors = newest.values_list("pk", "errors").first() or ("", None)
        last = errors[-1] if errors and isinstance(errors, list) and isinstance(errors[-1], dict) else {}
        item.exception_class_path = str(last.get("exception_class_path", ""))
        item.summary = str(last.get("summary", ""))
        item.traceback = str(last.get("traceback", ""))
