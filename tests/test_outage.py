"""Outage: the worker's backoff through database errors (real errors from the database)."""

import threading
import time

import pytest
from django.db import connection, transaction

from django_dbjobs import outage
from django_dbjobs.outage import Outage

pytestmark = pytest.mark.django_db(transaction=True)


def failing_query():
    """A statement the database rejects: a real DatabaseError from the driver."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT * FROM dbjobs_no_such_table")


def test_retries_with_growing_pauses_until_the_database_answers(monkeypatch):
    monkeypatch.setattr(outage, "FIRST_PAUSE", 0.01)
    calls, errors = [], []

    def action():
        calls.append(time.monotonic())
        if len(calls) < 4:
            failing_query()
        return "done"

    backoff = Outage(threading.Event(), on_error=lambda: errors.append(1))
    assert backoff.call(action, "testing") == "done"
    assert len(calls) == 4 and len(errors) == 3
    gaps = [b - a for a, b in zip(calls, calls[1:], strict=False)]
    assert gaps[0] >= 0.01 and gaps[2] >= 0.04, gaps  # 0.01, 0.02, 0.04
    assert backoff.pause == 0.01, "a success resets the pause"


def test_once_or_giving_up_returns_none_after_a_single_pause(monkeypatch):
    monkeypatch.setattr(outage, "FIRST_PAUSE", 0.01)
    calls = []

    def action():
        calls.append(1)
        if len(calls) < 3:
            failing_query()
        return "too late"

    assert Outage(threading.Event(), lambda: None).call(action, "testing", once=True) is None
    forced = Outage(threading.Event(), lambda: None, give_up=lambda: True)
    assert forced.call(action, "releasing after a forced stop") is None
    assert len(calls) == 2, "neither kept retrying"
    assert Outage(threading.Event(), lambda: None).call(action, "testing") == "too late"
