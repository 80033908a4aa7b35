"""Outage: the worker's backoff through database errors (real errors from the database)."""

import threading
import time

import pytest
from django.db import connection, transaction

from django_dbjobs.db import outage
from django_dbjobs.db.outage import Outage
from django_dbjobs.exceptions import MissingMigrations
from django_dbjobs.models import Job
from tests import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def lost_connection():
    """Break this thread's connection under Django, as a server restart does, and use it."""
    connection.ensure_connection()
    connection.connection.close()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def missing_table():
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT * FROM dbjobs_no_such_table")


def test_retries_with_growing_pauses_until_the_database_answers(monkeypatch):
    monkeypatch.setattr(outage, "FIRST_PAUSE", 0.01)
    calls, errors = [], []

    def action():
        calls.append(time.monotonic())
        if len(calls) < 4:
            lost_connection()
        return "done"

    backoff = Outage("default", on_error=lambda: errors.append(1))
    assert backoff.call(action, "testing") == "done"
    assert len(calls) == 4 and len(errors) == 3
    gaps = [b - a for a, b in zip(calls, calls[1:], strict=False)]
    assert gaps[0] >= 0.01 and gaps[2] >= 0.04, gaps  # 0.01, 0.02, 0.04
    assert backoff.pause == 0.01, "a success resets the pause"


def test_once_or_a_forced_stop_returns_none_after_a_single_pause(monkeypatch):
    monkeypatch.setattr(outage, "FIRST_PAUSE", 0.01)
    calls = []

    def action():
        calls.append(1)
        if len(calls) < 3:
            lost_connection()
        return "too late"

    assert Outage("default").call(action, "testing", once=True) is None
    forced = threading.Event()
    forced.set()
    assert Outage("default", forced=forced).call(action, "releasing after a forced stop") is None
    assert len(calls) == 2, "neither kept retrying"
    assert Outage("default").call(action, "testing") == "too late"


def test_a_forced_stop_ends_a_long_pause_at_once(monkeypatch):
    monkeypatch.setattr(outage, "FIRST_PAUSE", 30.0)
    forced = threading.Event()
    threading.Timer(0.3, forced.set).start()
    started = time.monotonic()
    assert Outage("default", forced=forced).call(lost_connection, "testing") is None
    assert time.monotonic() - started < 5


def test_a_missing_table_is_a_setup_error_not_an_outage():
    calls = []

    def action():
        calls.append(1)
        missing_table()

    with pytest.raises(MissingMigrations, match="manage.py migrate"):
        Outage("default").call(action, "testing")
    assert calls == [1]


def test_a_value_the_database_refuses_is_raised_at_once_not_retried():
    job = jobs.add.enqueue(1, 2)
    calls = []

    def action():
        calls.append(1)
        Job.objects.filter(pk=job.pk).update(priority=1000)  # outside the CHECK range

    with pytest.raises(Exception) as caught:
        Outage("default").call(action, "testing")
    assert calls == [1]
    from django_dbjobs import db

    assert db.error_kind(caught.value, "default") is db.ErrorKind.DATA


def test_a_forced_stop_gives_up_at_once_even_after_a_long_outage():
    forced = threading.Event()
    forced.set()
    backoff = Outage("default", forced=forced)
    backoff.pause = 30.0  # grown through a long outage
    started = time.monotonic()
    assert backoff.call(lost_connection, "releasing jobs") is None
    assert time.monotonic() - started < 2
