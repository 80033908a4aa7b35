"""The error classes raised by django_dbjobs."""


class DbJobsError(Exception):
    """Base class for every error django_dbjobs raises."""


class InvalidJob(DbJobsError, ValueError):
    """A job could not be enqueued because an argument or option is invalid."""


class UnknownJob(InvalidJob):
    """The job is not registered with @job, so no worker would run it."""


class UnknownOption(InvalidJob, TypeError):
    """enqueue() was given an option it does not have (often a job argument outside kwargs=)."""


class InvalidJobArguments(InvalidJob, TypeError):
    """The job's arguments would not survive a round trip through JSON, or do not fit its signature.

    A TypeError too, as Django's task backends raise for arguments that are not JSON data.
    """


class PayloadTooLarge(InvalidJobArguments):
    """The job's arguments are larger than DBJOBS_MAX_PAYLOAD_BYTES."""


class InvalidJobContext(InvalidJob):
    """DBJOBS_CONTEXT_CAPTURE returned something other than a small JSON object."""


class UnsupportedDatabase(DbJobsError):
    """The database cannot run a job queue safely (too old, or misconfigured)."""


class MissingMigrations(DbJobsError):
    """The database lacks the app's tables or columns: ``manage.py migrate`` has not run."""


class WorkerLost(DbJobsError):
    """Recorded for an attempt whose worker stopped heartbeating (killed, frozen, lost)."""


class InvalidSchedule(DbJobsError, ValueError):
    """A schedule's cron expression, timezone, job or options are invalid."""


class ResumeLater(BaseException):
    """Raised by a job to hand itself back: READY again, its attempt not charged, its checkpoint kept.

    What a long job does when its worker is stopping (``current_job().stopping``, a
    deploy's SIGTERM) once it has stored its place with ``current_job().checkpoint()``:
    another worker carries on from there (``current_job().resume``) after `delay` seconds.
    A BaseException, so that ``except Exception`` in the job does not swallow it.
    """

    def __init__(self, delay: float = 0.0):
        # Checked here, where the job raises it: a bad delay fails the job with this message.
        if isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay < 10**9:
            raise ValueError(f"ResumeLater(delay) takes a number of seconds, 0 or more; got {delay!r}.")
        super().__init__(delay)
        self.delay = float(delay)


class JobInterrupted(BaseException):
    """Raised in a running job by its worker: the base of JobTimeout and JobCancelled.

    A BaseException, like KeyboardInterrupt, so that ``except Exception`` in a job does not
    swallow it.
    """


class JobTimeout(JobInterrupted):
    """Raised in a job that ran past its timeout (@job(timeout=...), DBJOBS_DEFAULT_TIMEOUT).

    The attempt is recorded as failed and retried or dead-lettered as usual.
    """


class JobCancelled(JobInterrupted):
    """Raised in a job whose cancellation was requested (``Job.objects.filter(...).cancel()``, the admin).

    The job is recorded as FAILED with this error and never retried. A job may raise it
    itself, after seeing ``current_job().cancel_requested``, to stop as cancelled.
    """


class UnimportedJobWarning(RuntimeWarning):
    """A job is defined in a module workers do not import: they would hand its jobs back as unknown."""


class UnservedQueueWarning(RuntimeWarning):
    """A job was enqueued (in DEBUG) on a queue nothing names and no live worker serves."""


class DependencyFailed(JobCancelled):
    """Recorded for a job enqueued ``after=`` others when one of them failed: it never ran.

    Never raised in a job; its class path is the stored error of such a job (a dead
    letter, cancelled), and what ``django.tasks`` reports for it.
    """


class BatchFinished(InvalidJob):
    """A job was added to a batch that has finished: its callbacks already ran."""


class DependencyCycle(InvalidJob):
    """A job would wait for itself, and never run: a job it waits for (``after=``) waits, at
    once or through other jobs and batches, for a callback of the batch it joins, which
    waits for every job of its batch. Raised before anything is written."""


class MetricsUnavailable(DbJobsError):
    """``run_jobs --metrics-port`` cannot serve its metrics: prometheus_client is missing, or
    the address is taken or refused."""
