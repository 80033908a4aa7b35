"""What the checker found: the rows, jobs and emails a job's extra run changed, or its error."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..models import Job

#: The longest value shown in a report; longer ones are cut in the middle.
MAX_SHOWN = 60

#: How a job was run again, as a report says it.
RUN_TWICE = "run twice"
RUN_AFTER_DEATH = "run again after its worker died before storing its outcome"


def shown(value: Any) -> str:
    """`value`'s repr, at most MAX_SHOWN characters."""
    text = repr(value)
    if len(text) <= MAX_SHOWN:
        return text
    half = (MAX_SHOWN - 3) // 2
    return f"{text[:half]}...{text[-half:]}"


@dataclasses.dataclass(frozen=True)
class RowChange:
    """One row the extra run added, removed or changed."""

    table: str  # the database table
    model: str  # the model's label, "shop.Order"
    pk: Any
    kind: str  # "added", "removed" or "changed"
    #: Changed: column -> (value after one run, value after the extra run). Added or removed: the row.
    values: dict[str, Any]

    def __str__(self) -> str:
        where = f"{self.table} ({self.model}) pk={self.pk!r}"
        if self.kind == "changed":
            changes = ", ".join(
                f"{column} {shown(old)} -> {shown(new)}" for column, (old, new) in self.values.items()
            )
            return f"{where} changed: {changes}"
        row = ", ".join(f"{column}={shown(value)}" for column, value in self.values.items())
        return f"{where} {self.kind}: {row}"


@dataclasses.dataclass(frozen=True)
class Finding:
    """What one extra run of a job did that a single run had not: it is not safe to run twice."""

    job: Job
    how: str  # RUN_TWICE or RUN_AFTER_DEATH
    rows: tuple[RowChange, ...] = ()
    #: The jobs the extra run enqueued, as "name(args, kwargs) on queue".
    enqueued: tuple[str, ...] = ()
    #: The emails the extra run sent (django.core.mail.outbox).
    emails: tuple[str, ...] = ()
    #: The error the extra run failed with, if it raised.
    error: str | None = None

    def lines(self) -> list[str]:
        lines = [f"  {self.how}:"]
        if self.error is not None:
            lines.append(f"    raised {self.error}")
        lines += [f"    {row}" for row in self.rows]
        lines += [f"    enqueued again: {job}" for job in self.enqueued]
        lines += [f"    sent again: email {email}" for email in self.emails]
        return lines


@dataclasses.dataclass
class IdempotencyReport:
    """The jobs run (as run_jobs() returns them), what their extra runs changed, and what went unchecked."""

    #: The jobs run once for real, one entry per attempt, as each attempt left them.
    jobs: list[Job] = dataclasses.field(default_factory=list)
    findings: list[Finding] = dataclasses.field(default_factory=list)
    #: Jobs not checked, with why: their single run failed, say (a failure is retried anyway).
    unchecked: list[tuple[Job, str]] = dataclasses.field(default_factory=list)

    @property
    def safe(self) -> bool:
        """Whether no job's extra run changed anything or raised."""
        return not self.findings

    def message(self) -> str:
        """The findings, job by job, as an AssertionError says them."""
        jobs: dict[Any, list[Finding]] = {}
        for finding in self.findings:
            jobs.setdefault(finding.job.pk, []).append(finding)
        count = len(jobs)
        lines = [f"{count} job{'s are' if count != 1 else ' is'} not safe to run twice:"]
        for findings in jobs.values():
            job = findings[0].job
            lines.append(f"{job.name}(args={shown(job.args)}, kwargs={shown(job.kwargs)}) job {job.pk}")
            for finding in findings:
                lines += finding.lines()
        return "\n".join(lines)

    def assert_safe(self) -> None:
        """Raise AssertionError naming every job whose extra run changed something or raised."""
        if self.findings:
            raise AssertionError(self.message())
