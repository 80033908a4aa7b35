"""The test app's tables: what the idempotency checker's jobs write (tests/idempotency_jobs.py)."""

from django.db import models


class Ledger(models.Model):
    """A named account with a balance; its name is unique, so a second create() raises."""

    name = models.CharField(max_length=50, unique=True)
    balance = models.IntegerField(default=0)
    imported = models.BooleanField(default=False)
    touched_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "tests"


class Entry(models.Model):
    """A line of a ledger."""

    ledger = models.ForeignKey(Ledger, on_delete=models.CASCADE, related_name="entries")
    text = models.CharField(max_length=100)
    amount = models.IntegerField(default=0)

    class Meta:
        app_label = "tests"
