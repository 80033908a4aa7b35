"""WorkerProcess: one row per running run_jobs process."""

import datetime

from django.db import models
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from ..conf import settings


class WorkerProcessQuerySet(models.QuerySet):
    def live(self) -> "WorkerProcessQuerySet":
        """Workers whose heartbeat is fresh (within DBJOBS_HEARTBEAT_TIMEOUT, by the database clock)."""
        return self.filter(heartbeat_at__gte=Now() - datetime.timedelta(seconds=settings.HEARTBEAT_TIMEOUT))


class WorkerProcess(models.Model):
    """A run_jobs process; its id is fresh for every process start."""

    id = models.CharField(_("id"), max_length=64, primary_key=True)
    hostname = models.CharField(_("hostname"), max_length=255)
    pid = models.PositiveIntegerField(_("pid"))
    queues = models.JSONField(_("queues"), default=list, blank=True)
    concurrency = models.PositiveSmallIntegerField(_("concurrency"))
    started_at = models.DateTimeField(_("started at"), db_default=Now())
    heartbeat_at = models.DateTimeField(_("last heartbeat"), db_default=Now())

    objects = WorkerProcessQuerySet.as_manager()

    class Meta:
        verbose_name = _("worker")
        verbose_name_plural = _("workers")
        ordering = ["started_at"]

    def __str__(self) -> str:
        return self.id

    def serves(self, queue: str) -> bool:
        """Whether this worker takes jobs from `queue` (no queues given: every queue)."""
        return not self.queues or queue in self.queues
