"""The tables of flow control: a lock row per concurrency key, the start slots of rate-limited queues."""

from __future__ import annotations

import datetime

from django.db import models
from django.utils.translation import gettext_lazy as _

#: A rate slot never used: long enough ago for any period.
NEVER_USED = datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC)


class ConcurrencyKey(models.Model):
    """A concurrency key's lock row: the admissions of one key's jobs take turns on it.

    flow/admission.py locks it before counting the key's slots in use, so two workers
    never both see a free slot and fill it twice. Rows of keys with no active job are
    deleted by the retention pass.
    """

    key = models.CharField(_("concurrency key"), max_length=200, primary_key=True)

    class Meta:
        verbose_name = _("concurrency key")
        verbose_name_plural = _("concurrency keys")

    def __str__(self) -> str:
        return self.key


class RateSlot(models.Model):
    """One of the N starts per period of a rate-limited queue, and when it was last used.

    A claim from the queue takes a slot last used a whole period ago (SKIP LOCKED) and
    stamps it: N slots, each used at most once per period, make at most N starts in
    any window of one period, across every worker (flow/rates.py).
    """

    queue = models.CharField(_("queue"), max_length=100)
    number = models.PositiveSmallIntegerField(_("slot"))
    used_at = models.DateTimeField(_("last used at"), default=NEVER_USED)

    class Meta:
        verbose_name = _("rate slot")
        verbose_name_plural = _("rate slots")
        constraints = [
            models.UniqueConstraint(fields=["queue", "number"], name="dbjobs_rateslot_one_per_number"),
        ]

    def __str__(self) -> str:
        return f"{self.queue} #{self.number}"
