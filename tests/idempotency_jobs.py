"""Jobs for the idempotency checker's tests, safe to run twice or not: imported by tests/jobs.py."""

import time

from django.core import mail
from django.db import transaction
from django.db.models import F
from django.dispatch import receiver

from django_dbjobs import ResumeLater, current_job, enqueue, job, resumable
from django_dbjobs.signals import job_finished
from tests.models import Entry, Ledger


@job(max_attempts=1)
def credit(name: str, amount: int):
    """Not safe: each run adds to the balance and writes one more entry."""
    ledger = Ledger.objects.get(name=name)
    Ledger.objects.filter(pk=ledger.pk).update(balance=F("balance") + amount)
    Entry.objects.create(ledger=ledger, text="credit", amount=amount)


@job(max_attempts=1)
async def acredit(name: str, amount: int):
    """credit() as an ``async def`` job: not safe either."""
    await Ledger.objects.filter(name=name).aupdate(balance=F("balance") + amount)


@job(max_attempts=1)
def set_balance(name: str, amount: int):
    """Safe: the same rows, whatever ran before (update_or_create; auto_now is left out)."""
    ledger, _ = Ledger.objects.update_or_create(name=name, defaults={"balance": amount})
    Entry.objects.get_or_create(ledger=ledger, text="opening", defaults={"amount": amount})


@job(max_attempts=1)
def open_ledger(name: str):
    """Not safe: a second run's create() breaks the unique name, and raises."""
    Ledger.objects.create(name=name)


@job(max_attempts=1)
def replace_entries(name: str, amounts: list[int]):
    """Safe: it deletes the ledger's entries and writes them again (new ids, same content)."""
    ledger = Ledger.objects.get(name=name)
    with transaction.atomic():
        ledger.entries.all().delete()
        Entry.objects.bulk_create([Entry(ledger=ledger, text="line", amount=amount) for amount in amounts])


@job(max_attempts=1)
def follow_up(name: str):
    """Not safe: each run enqueues one more job (itself safe)."""
    enqueue(set_balance, name, 0)


@job(max_attempts=1)
def follow_up_once(name: str):
    """Safe: the job it enqueues has a unique key, and a second run finds it waiting."""
    enqueue(set_balance, name, 0, unique_key=f"follow-up-{name}")


@job(max_attempts=1)
def welcome(name: str):
    """Not safe: each run sends the email again."""
    mail.send_mail(f"Welcome, {name}", "Hello.", "shop@example.com", [f"{name}@example.com"])


@job(max_attempts=1)
def import_ledger(name: str):
    """Safe to run again once its success is stored, not before: its guard, ``imported``, is set
    by a receiver of job_finished (below), which a worker dying before the outcome never sends."""
    ledger = Ledger.objects.get(name=name)
    if ledger.imported:
        return
    Entry.objects.create(ledger=ledger, text="import", amount=1)


@receiver(job_finished)
def _mark_imported(sender, job, status, **kwargs):
    if job.name == import_ledger.name and status == "SUCCESSFUL":
        Ledger.objects.filter(name=job.args[0]).update(imported=True)


@job(max_attempts=1)
def import_ledger_in_one_transaction(name: str):
    """Safe: the guard is written with the work, in the job's own transaction."""
    with transaction.atomic():
        ledger = Ledger.objects.select_for_update().get(name=name)
        if ledger.imported:
            return
        Entry.objects.create(ledger=ledger, text="import", amount=1)
        Ledger.objects.filter(pk=ledger.pk).update(imported=True)


@job(max_attempts=1)
def hold_worker(entries: int, seconds: float):
    """Keep a worker busy, so that the successes of its other jobs wait in its batch, until
    `entries` entries exist and `seconds` more; run again after a crash, return at once."""
    me = current_job()
    if me.resume:
        return
    me.checkpoint({"held": True})
    while Entry.objects.count() < entries:
        time.sleep(0.05)
    time.sleep(seconds)


@job(max_attempts=1)
def credit_each(names: list):
    """Not safe: a resumable() walk adding to each ledger; after a death, the items since its
    last checkpoint run again."""
    for name in resumable(names, every=100):
        Ledger.objects.filter(name=name).update(balance=F("balance") + 1)


@job(max_attempts=1)
def hand_back_first():
    """Hands itself back on its first run (no checkpoint yet), then does nothing."""
    if current_job().resume is None:
        current_job().checkpoint({"started": True})
        raise ResumeLater(3600)
