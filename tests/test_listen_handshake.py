"""PostgreSQL: a LISTEN connection on another alias, or through a pooler, proves it hears the
worker's database before the worker trusts it (db/listen_handshake.py); one that does not
(here: an alias of another database on the same server) leaves the worker probing.

Through a real transaction pooler: tests/test_pgbouncer.py.
"""

import logging
import threading
import time

import pytest
from django.db import connection, connections
from django.db.utils import load_backend

from django_dbjobs import db, enqueue
from django_dbjobs.db.listen import CHANNEL, SCHEDULES_PAYLOAD, Listen
from django_dbjobs.db.listen_handshake import HANDSHAKE_PREFIX, HANDSHAKE_TIMEOUT, hears_own_notifies
from django_dbjobs.worker.lifecycle.idle_wait import IdleWaiter
from django_dbjobs.worker.lifecycle.wake_event import WakeEvent
from tests import jobs
from tests.test_wakeup import notify

pytestmark = [
    pytest.mark.skipif(not db.supports_listen(), reason="LISTEN exists on PostgreSQL only"),
    pytest.mark.django_db(transaction=True),
]

UNHEARD_LINE = "heard nothing of database 'default': a transaction pooler, or another database"


@pytest.fixture
def alias(monkeypatch):
    """Make `alias` a database alias of the same server, to database `name`; return it.

    Not in DATABASES, whose aliases pytest-django refuses unless a test declares them (and
    flushes them after): connections.create_connection(), which Listen opens its connection
    with, makes it as Django makes a connection of its own settings."""

    def add(alias: str, name: str) -> str:
        settings_dict = {**connection.settings_dict, "NAME": name}
        wrapper = load_backend(settings_dict["ENGINE"]).DatabaseWrapper
        create = connections.create_connection
        monkeypatch.setattr(
            connections, "create_connection", lambda a: wrapper(settings_dict, a) if a == alias else create(a)
        )
        return alias

    return add


def started(settings, listen_database) -> IdleWaiter:
    settings.DBJOBS_LISTEN_DATABASE = listen_database
    waiter = IdleWaiter("default", WakeEvent(), None)
    waiter.start()
    return waiter


def test_a_listen_alias_of_another_database_fails_the_handshake_and_the_worker_probes(
    settings, alias, caplog
):
    """A DBJOBS_LISTEN_DATABASE that reaches another database (a second fleet's, sharing the
    setting) would never hear this one's jobs, nor its paused queues: the worker probes."""
    elsewhere = alias("elsewhere", "postgres")
    for setting in (elsewhere, {"default": elsewhere}):
        caplog.clear()
        began = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="django_dbjobs"):
            waiter = started(settings, setting)
        try:
            assert time.monotonic() - began < HANDSHAKE_TIMEOUT + 1
            assert waiter.way == "probe" and not waiter.listening
            assert waiter.listen_session() is None, "paused queues are not trusted to it"
            warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
            assert len(warnings) == 1 and UNHEARD_LINE in warnings[0], warnings
            assert "'elsewhere'" in warnings[0]
            assert waiter.wait(0.05) is True  # the look for work that connecting asks for
            threading.Timer(0.2, enqueue, [jobs.add, 1, 2]).start()
            began = time.monotonic()
            assert waiter.wait(5) is True and waiter.probed
            assert time.monotonic() - began < 1, "found by the probe"
        finally:
            waiter.stop()


def test_a_listen_alias_of_the_same_database_passes_the_handshake(settings, alias):
    direct = alias("direct", connection.settings_dict["NAME"])
    waiter = started(settings, direct)
    try:
        assert waiter.way == "listen:direct" and waiter.listening
        assert waiter.claims_on() is None, "heard there, claimed on the worker's own connection"
        assert waiter.wait(1) is True  # the look for work that connecting asks for
        threading.Timer(0.2, enqueue, [jobs.add, 1, 2]).start()
        assert waiter.wait(5) is True and not waiter.probed, "woken by NOTIFY"
    finally:
        waiter.stop()


def test_a_listen_that_fails_the_handshake_is_closed_and_says_why(alias):
    listen = Listen(alias("elsewhere", "postgres"), own="default", claims_allowed=False)
    try:
        assert listen.connect() is False
        assert listen.unheard and listen.connection is None and not listen.listening
    finally:
        listen.close()


def test_the_handshake_keeps_what_else_it_hears_and_others_ignore_its_payload():
    """Notifications read while it waits for its own are passed on (none lost); a listener that
    is not shaking hands counts a handshake's payload as nothing (older releases: as a job)."""
    listening = connections.create_connection("default")
    bystander = Listen("default")
    try:
        with listening.cursor() as cursor:
            cursor.execute(f"LISTEN {CHANNEL}")
        assert bystander.connect()
        notify(SCHEDULES_PAYLOAD)
        time.sleep(0.1)  # delivered before the handshake's own
        others = []
        assert hears_own_notifies(listening, "default", CHANNEL, others.append) is True
        assert others == [SCHEDULES_PAYLOAD]
        time.sleep(0.1)
        heard = bystander.read()
        assert heard.schedules == 1 and heard.jobs == 0, "the handshake's NOTIFY is no job"
        notify(HANDSHAKE_PREFIX + "someone-else")
        time.sleep(0.1)
        assert not any(bystander.read())
    finally:
        bystander.close()
        listening.close()


def test_a_reconnection_that_fails_the_handshake_pauses_and_tries_again(alias):
    """Once it has heard (a first session passed), a handshake not heard on a reconnection is
    a slow server, not a pooler: the connection pauses and is tried again, never given up."""
    listen = Listen(alias("elsewhere", "postgres"), own="default", claims_allowed=False)
    listen.states.sessions = 1  # as if its first session had heard
    try:
        assert listen.connect() is False
        assert not listen.unheard and listen.connection is None
        assert listen.retry_in() > 0, "paused, to be tried again"
    finally:
        listen.close()
