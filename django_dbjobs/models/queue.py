"""Queue: a queue an operator paused (or once paused); jobs name their queue by text."""

from __future__ import annotations

import re
from typing import Any

from django.db import models
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from ..exceptions import InvalidJob

QUEUE_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,100}\Z")  # \Z: "$" would let a final newline through


def queue_name(name: Any) -> str:
    """A well-formed queue name, whether or not DBJOBS_QUEUES lists it."""
    if not isinstance(name, str) or not QUEUE_NAME.match(name):
        raise InvalidJob(f"queue must be 1 to 100 letters, digits, '_', '.', ':' or '-', not {name!r}.")
    return name


class QueueQuerySet(models.QuerySet):
    def paused(self) -> QueueQuerySet:
        return self.filter(paused_at__isnull=False)

    def pause(self, names: list[str], by: str = "") -> int:
        """Pause these queues: every worker stops claiming from them within about a second.

        Jobs already running finish; READY jobs wait. Return how many were newly paused
        (one fenced UPDATE, so pausing twice changes nothing).
        """
        names = sorted({queue_name(name) for name in names})
        self.bulk_create([self.model(name=name) for name in names], ignore_conflicts=True)
        return self.filter(name__in=names, paused_at__isnull=True).update(paused_at=Now(), paused_by=by[:150])

    def resume(self, names: list[str]) -> int:
        """Let workers claim from these queues again; return how many were paused."""
        return self.filter(name__in=list(names), paused_at__isnull=False).update(paused_at=None, paused_by="")


class Queue(models.Model):
    """A queue with a row of its own: one that is or was paused. Other queues have none."""

    name = models.CharField(_("name"), max_length=100, primary_key=True)
    paused_at = models.DateTimeField(
        _("paused at"), null=True, blank=True, help_text=_("Empty: workers claim from this queue.")
    )
    paused_by = models.CharField(_("paused by"), max_length=150, blank=True, default="")

    objects = QueueQuerySet.as_manager()

    class Meta:
        verbose_name = _("queue")
        verbose_name_plural = _("queues")
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
