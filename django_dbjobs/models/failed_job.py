"""FailedJob: the dead letters (FAILED jobs), with fenced retry and delete."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from django.db import IntegrityError, models, transaction
from django.db.models import F, Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from .batched_deletes import BATCH_SIZE
from .job import Job
from .queryset import JobQuerySet
from .states import Blocked, Isolation, JobStatus, blocked_again
from .workflow import Batch


@dataclass
class RetryReport:
    """What a retry did: jobs queued again, and jobs skipped with the reason."""

    retried: int = 0
    #: No longer FAILED when the retry came: retried or deleted meanwhile (a double submit).
    not_failed: int = 0
    #: Their unique_key is held by another READY or RUNNING job.
    key_held: int = 0

    @property
    def skipped(self) -> int:
        return self.not_failed + self.key_held

    def add(self, other: RetryReport) -> None:
        self.retried += other.retried
        self.not_failed += other.not_failed
        self.key_held += other.key_held


def retry_changes() -> dict:
    """The columns a retry writes: READY and due now, attempts reset, the error history kept
    (its cause, the fingerprint of a dead letter, cleared)."""
    return {
        "status": JobStatus.READY,
        "run_at": Now(),
        "attempts": 0,
        "worker": None,
        "worker_ids": [],
        "finished_at": None,
        "error_fingerprint": None,
        "return_value": None,
        "active_key": F("unique_key"),
        "isolation": Isolation.NONE,
        "blocked": blocked_again(),
        "cancel_requested_at": None,
        "waiting_for": None,
    }


class FailedJobQuerySet(JobQuerySet):
    def retry_all(self, batch_size: int = BATCH_SIZE, fence: Q | None = None) -> RetryReport:
        """Queue these dead letters again, `batch_size` at a time; report what changed and what not.

        Each batch is one transaction of fenced UPDATEs (``status = 'FAILED'``, and `fence`,
        in the WHERE clause), so a job retried twice, or deleted meanwhile, is skipped, never
        run twice. A job whose unique_key another active job holds is skipped too.
        """
        report = RetryReport()
        for pks in self._batches(batch_size):
            report.add(self._retry_batch(pks, fence))
        return report

    def delete_all(self, batch_size: int = BATCH_SIZE, fence: Q | None = None) -> tuple[int, int]:
        """Delete these dead letters, `batch_size` at a time; return (deleted, skipped).

        Fenced: a job that is no longer FAILED (retried meanwhile), or fails `fence`, is skipped.
        """
        return self._delete_in_batches(JobStatus.FAILED, batch_size, fence)

    def _retry_batch(self, pks: list[str], fence: Q | None = None) -> RetryReport:
        fence = fence or Q()
        jobs = Job.objects.using(self.db)
        keyed = dict(jobs.filter(pk__in=pks, unique_key__isnull=False).values_list("pk", "unique_key"))
        report = RetryReport()
        with transaction.atomic(using=self.db):
            # Locked, they stay FAILED until retried here: each one retried takes its
            # failure back from its batch, if the batch is not finished (its callbacks ran).
            batches = dict(
                jobs.select_for_update()
                .filter(pk__in=pks, batch__isnull=False)
                .failed()
                .order_by("pk")
                .values_list("pk", "batch_id")
            )
            callbacks = self._callbacks_of(pks)
            retried: list[str] = []
            plain = [pk for pk in pks if pk not in keyed]
            if plain:
                report.retried += jobs.filter(fence, pk__in=plain).failed().update(**retry_changes())
                retried += [pk for pk in plain if pk in batches or pk in callbacks]
            report.not_failed += len(plain) - report.retried
            for pk in keyed:  # one at a time: a key held elsewhere fails only its own statement
                try:
                    with transaction.atomic(using=self.db):
                        changed = jobs.filter(fence, pk=pk).failed().update(**retry_changes())
                except IntegrityError:
                    report.key_held += 1
                    continue
                report.retried += changed
                report.not_failed += 1 - changed
                if changed and (pk in batches or pk in callbacks):
                    retried.append(pk)
            counts = Counter(batches[pk] for pk in retried if pk in batches)
            for batch_id, count in sorted(counts.items()):  # lock order
                Batch.objects.using(self.db).filter(pk=batch_id, finished_at__isnull=True).update(
                    failed=F("failed") - count
                )
            for pk in retried:
                if pk in callbacks:
                    _callback_again(jobs.filter(pk=pk), callbacks[pk])
        return report

    def _callbacks_of(self, pks: list[str]) -> dict[str, Batch]:
        """The batches (locked: see _callback_again()) whose callbacks are among `pks`, by callback id.

        Found first without a lock, then only those batches locked, by primary key: a retry of
        no callback locks no batch. A third of SQLite's oldest limit of bound parameters per
        statement, for the three columns.
        """
        batches = Batch.objects.using(self.db)
        found: set[str] = set()
        for start in range(0, len(pks), 300):
            chunk = pks[start : start + 300]
            columns = Q(on_success__in=chunk) | Q(on_failure__in=chunk) | Q(on_complete__in=chunk)
            found.update(batches.filter(columns).values_list("pk", flat=True))
        if not found:
            return {}
        asked = set(pks)
        locked = batches.select_for_update().filter(pk__in=sorted(found)).order_by("pk")
        return {pk: batch for batch in locked for pk in batch.callback_ids().values() if pk in asked}


def _callback_again(callback, batch: Batch) -> None:
    """Give a retried callback what it runs with: its batch's summary, or a wait for it.

    A callback cancelled while it waited for its batch was stored with a placeholder
    argument. Its batch finished, it runs with the batch's summary, as it would have been
    released with; its batch still open, it waits for it again and is released with the
    summary when it finishes (settling.release_callbacks()). The batch row is locked since
    before the retry, so it cannot finish between the two.
    """
    if batch.is_finished:
        callback.update(args=[batch.summary()])
    else:
        callback.update(blocked=Blocked.AFTER, waiting_for=1)


class FailedJobManager(models.Manager.from_queryset(FailedJobQuerySet)):
    def get_queryset(self) -> FailedJobQuerySet:
        return super().get_queryset().filter(status=JobStatus.FAILED)


class FailedJob(Job):
    """A job that ran out of attempts: a dead letter."""

    objects = FailedJobManager()

    class Meta:
        proxy = True
        verbose_name = _("dead letter")
        verbose_name_plural = _("dead letters")

    def retry(self) -> RetryReport:
        """Queue this dead letter again (fenced: a no-op if it is no longer FAILED)."""
        return FailedJob.objects.using(self._state.db).filter(pk=self.pk).retry_all()
