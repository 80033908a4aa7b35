"""The tables of workflows: batches of jobs with callbacks, and the jobs a job waits for."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from .. import db
from .ids import new_id


class Batch(models.Model):
    """Jobs enqueued together, and the callbacks that run once all of them are finished.

    The counters are what decide: every job of the batch that reaches a final state adds
    one to ``succeeded`` or ``failed`` in the transaction that stores its outcome
    (models/settling.py), under this row's lock, so the transaction that makes them reach
    ``total`` is the only one that sees it and sets ``finished_at``. It releases the
    callbacks, which were stored with the batch, waiting: each runs once by construction.
    """

    id = models.CharField(_("id"), max_length=36, primary_key=True, default=new_id, editable=False)
    description = models.CharField(_("description"), max_length=255, blank=True, default="")
    total = models.PositiveIntegerField(_("jobs"), default=0)
    succeeded = models.PositiveIntegerField(_("succeeded"), default=0)
    failed = models.PositiveIntegerField(
        _("failed"), default=0, help_text=_("Dead-lettered or cancelled jobs of the batch.")
    )
    # The callback jobs' ids; indexed, so a job's page finds the batch it is a callback of.
    on_success = models.CharField(_("on success"), max_length=36, null=True, blank=True, db_index=True)
    on_failure = models.CharField(_("on failure"), max_length=36, null=True, blank=True, db_index=True)
    on_complete = models.CharField(_("on complete"), max_length=36, null=True, blank=True, db_index=True)
    created_at = models.DateTimeField(_("created at"), db_default=Now())
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)

    class Meta:
        verbose_name = _("batch")
        verbose_name_plural = _("batches")
        ordering = ["-created_at", "id"]
        indexes = [models.Index(fields=["finished_at", "id"], name="dbjobs_batch_finished_idx")]

    def __str__(self) -> str:
        return self.description or self.id

    @property
    def is_finished(self) -> bool:
        return self.finished_at is not None

    def callback_ids(self) -> dict[str, str]:
        """The callback jobs' ids by kind (on_success, on_failure, on_complete)."""
        kinds = ("on_success", "on_failure", "on_complete")
        return {kind: getattr(self, kind) for kind in kinds if getattr(self, kind)}

    def summary(self) -> dict:
        """What a callback receives: the batch's id, description and counts."""
        return {
            "id": self.id,
            "description": self.description,
            "total": self.total,
            "succeeded": self.succeeded,
            "failed": self.failed,
        }


class JobDependency(models.Model):
    """`job` waits until `upstream` has succeeded (or, with `run_on_failure`, finished).

    ``upstream`` is an id, not a foreign key: retention may delete a finished upstream
    job long before anyone looks at the job that waited for it.
    """

    job = models.ForeignKey(
        "Job",
        on_delete=models.CASCADE,
        db_constraint=False,
        related_name="dependencies",
        verbose_name=_("job"),
    )
    upstream = models.CharField(_("waits for"), max_length=36, db_index=True)
    run_on_failure = models.BooleanField(_("runs if it fails"), default=False)
    #: Set when the upstream job's outcome was applied: it is applied once.
    counted = models.BooleanField(_("counted"), default=False)

    class Meta:
        verbose_name = _("job dependency")
        verbose_name_plural = _("job dependencies")
        constraints = [
            models.UniqueConstraint(fields=["job", "upstream"], name="dbjobs_dependency_once"),
        ]
        indexes = [db.UncountedEdgesIndex(fields=["job", "upstream"], name="dbjobs_dep_uncounted_idx")]

    def __str__(self) -> str:
        return f"{self.job_id} after {self.upstream}"
