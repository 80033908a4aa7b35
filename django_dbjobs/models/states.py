"""The values a job's state columns take, and the claim order."""

from django.db import models
from django.db.models import Case, Value, When
from django.utils.translation import gettext_lazy as _

MIN_PRIORITY = -100
MAX_PRIORITY = 100
#: The order workers claim in: higher priority first, then due time, then age.
CLAIM_ORDER = ("-priority", "run_at", "id")
#: How the last_error of a job handed back by a worker that did not know it begins
#: (operations/unknown_jobs.py); no exception's summary ("ClassName: ...") can begin so.
HANDED_BACK_PREFIX = "Handed back:"


class JobStatus(models.TextChoices):
    """A job's state; the values are those of django.tasks.TaskResultStatus."""

    READY = "READY", _("Ready")
    RUNNING = "RUNNING", _("Running")
    SUCCESSFUL = "SUCCESSFUL", _("Successful")
    FAILED = "FAILED", _("Failed")


class Blocked(models.TextChoices):
    """Why a READY job is left out of the claim (and of the claim index) for now.

    A job with a concurrency key waits as CONCURRENCY until the admission
    (flow/admission.py) gives it one of its key's slots: READY to Django, never claimed
    before then, and never read again by any claim while it waits.
    """

    NONE = "", _("No")
    CONCURRENCY = "CONCURRENCY", _("Waiting for a concurrency slot")


class Isolation(models.TextChoices):
    """Whether a job must run alone, so that a crash during its run can be pinned on it.

    A worker's successes and prefetched jobs are not written down one by one as they
    start (that would cost a write per job), so when a worker dies nobody knows which
    of its RUNNING jobs had started. They all go back uncharged, WAITING; a worker runs
    at most one WAITING job at a time, writes STARTED before calling it, and stores its
    outcome at once. A worker that dies then has at most one STARTED job: the one its
    death is charged to.
    """

    NONE = "", _("No")
    WAITING = "WAITING", _("Waiting to run alone")
    STARTED = "STARTED", _("Running alone")


def blocked_if_keyed():
    """The ``blocked`` value of a job going back to READY: a keyed job gives up its slot.

    Every write that makes a RUNNING (or FAILED) job READY again uses it, so a job
    waiting for a retry, or given back, holds no concurrency slot meanwhile.
    """
    return Case(
        When(concurrency_key__isnull=False, then=Value(Blocked.CONCURRENCY)),
        default=Value(Blocked.NONE),
        output_field=models.CharField(),
    )
