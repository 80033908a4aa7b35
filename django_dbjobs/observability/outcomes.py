"""The name of a stored outcome, as metrics label it and traces record it: succeeded, retried, failed..."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..exceptions import JobCancelled, JobTimeout
from ..models import JobStatus
from ..models.settling import CANCELLED

if TYPE_CHECKING:
    from ..models import Job

#: Every name outcome_of() gives; each stored outcome has exactly one.
OUTCOMES = ("succeeded", "retried", "failed", "cancelled")


def outcome_of(job: Job, status: str, failure: BaseException | None) -> str | None:
    """The name of the outcome `status` stored for `job`'s attempt that raised `failure`.

    None for a job handed back without running (a name this worker does not know).
    A timeout is named by what was stored after it, ``retried`` or ``failed``: timed_out()
    says apart that the attempt ran out of time.
    """
    if status == JobStatus.SUCCESSFUL:
        return "succeeded"
    if isinstance(failure, JobCancelled) or (status == JobStatus.FAILED and _recorded_cancelled(job)):
        return "cancelled"  # a retry of a job asked to stop is recorded cancelled (models/cancelling.py)
    if status == JobStatus.READY:
        return "retried" if failure is not None else None
    return "failed"


def timed_out(failure: BaseException | None) -> bool:
    """Whether the attempt that raised `failure` ran past its timeout (whatever was stored after)."""
    return isinstance(failure, JobTimeout)


def _recorded_cancelled(job: Job) -> bool:
    errors = job.errors
    return bool(errors) and errors[-1].get("exception_class_path") == CANCELLED
