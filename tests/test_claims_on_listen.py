"""PostgreSQL: a worker claims on its LISTEN connection while it is open (db/listen.py).

That session plans without sorts, so the claim needs no setting before it; a notification
psycopg takes while a claim runs there is kept for the next read; a claim that fails there
closes it, and the worker's own connection claims until it is open again.
"""

import time

import pytest
from django.db import connection

from django_dbjobs import db, enqueue, enqueue_many
from django_dbjobs.db.listen import QUEUES_PAYLOAD, SCHEDULES_PAYLOAD, Listen
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.models.claim_shape import claim
from django_dbjobs.worker.lifecycle.idle_wait import IdleWaiter
from django_dbjobs.worker.lifecycle.wake_event import WakeEvent
from tests import jobs
from tests.test_claim_without_sort import PREFER_SORTING
from tests.test_wakeup import notify
from tests.test_worker_parts import parts

pytestmark = [
    pytest.mark.skipif(not db.supports_listen(), reason="LISTEN exists on PostgreSQL only"),
    pytest.mark.django_db(transaction=True),
]


def run(wrapper, sql: str, params=()) -> list:
    with wrapper.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def claim_on(wrapper, limit: int) -> list[Job]:
    return claim(
        Job, lambda: Job.objects.all(), "default", "w", limit, None, True, frozenset(), unsorted=wrapper
    )


def test_the_listen_connection_plans_claims_in_index_order_whatever_the_costs(waiter):
    listen = waiter.claims_on()
    assert listen is waiter.listen.connection
    enqueue_many(jobs.add, [(n, n) for n in range(300)])
    run(connection, "ANALYZE django_dbjobs_job")
    sql, params = Job.objects.claim_sql("w", 20)
    for wrapper in (connection, listen):
        run(wrapper, PREFER_SORTING)
    try:
        # The premise: left to its costs (the worker's own session), the planner sorts.
        assert "Sort" in "\n".join(row[0] for row in run(connection, f"EXPLAIN {sql}", params))
        plan = "\n".join(row[0] for row in run(listen, f"EXPLAIN {sql}", params))
        assert "Sort" not in plan and "dbjobs_job_claimable_idx" in plan, plan
        assert run(listen, "SHOW enable_sort") == [("off",)]
        taken = [job.args[0] for _ in range(5) for job in claim_on(listen, 20)]
        assert taken == list(range(100)), "in claim order"
        assert Job.objects.filter(status=JobStatus.RUNNING, worker="w").count() == 100
        assert run(connection, "SHOW enable_sort") == [("on",)], "the worker's own session is left as it was"
    finally:
        for wrapper in (connection, listen):
            run(wrapper, "RESET random_page_cost")


def test_notifications_that_arrive_while_a_claim_runs_on_the_connection_are_kept(waiter):
    notify()
    notify(SCHEDULES_PAYLOAD)
    notify(QUEUES_PAYLOAD)
    time.sleep(0.3)  # in the socket, unread: the claim's answer comes after them
    assert claim_on(waiter.claims_on(), 5) == []
    assert waiter.listen.read() == (1, 1, 1), "taken by psycopg during the claim, and lost"
    assert waiter.listen.read() == (0, 0, 0)
    notify()
    assert waiter.wait(10) is True  # read as before once nothing else reads the connection


def test_a_claim_on_a_broken_listen_connection_goes_on_on_the_worker_s_own(waiter, caplog):
    """Only the LISTEN connection broke (a pooler's idle timeout, pg_terminate_backend): not an
    outage. The same claim runs on the worker's own connection at once, and what the failed
    claim may have committed goes back once that claim's jobs are held;
    the LISTEN connection is opened again later, with its setting and its handler."""
    identity, claimer, threads, *_ = parts()
    claimer.claims_on, claimer.claim_failed_on = waiter.claims_on, waiter.claim_failed
    first = enqueue(jobs.add, 1, 1)
    pid = waiter.claims_on().connection.pgconn.backend_pid
    run(connection, "SELECT pg_terminate_backend(%s)", [pid])
    with caplog.at_level("WARNING", logger="django_dbjobs"):
        assert claimer.claim_free_slots() == 1
    assert "LISTEN connection lost" in caplog.text
    assert "Database error" not in caplog.text, "no outage, no pause"
    assert not claimer.in_doubt and waiter.claims_on() is None, "jobs not held given back: none"
    assert Job.objects.get(pk=first.pk).worker == identity.id
    assert waiter.wait(5) is True  # opened again after its pause: a wake-up
    reopened = waiter.claims_on()
    assert reopened is not None and run(reopened, "SHOW enable_sort") == [("off",)]
    second = enqueue(jobs.add, 2, 2)
    claimer.held.remove(threads.take_unstarted())  # the first one out of the way
    notify()
    time.sleep(0.3)
    assert claimer.claim_free_slots() == 1
    assert Job.objects.get(pk=second.pk).worker == identity.id
    assert waiter.listen.read()[0] >= 1, "the handler is on the new connection too"


def test_a_failed_claim_on_a_sound_listen_connection_is_any_failed_claim(waiter, caplog):
    """An error of the statement itself (here a lock timeout) leaves the LISTEN connection
    open: the claim fails as it would on the worker's own connection (it may have committed)."""
    from tests.test_wakeup import Listening

    _identity, claimer, *_ = parts()
    claimer.claims_on, claimer.claim_failed_on = waiter.claims_on, waiter.claim_failed
    enqueue(jobs.add, 1, 1)
    listen = waiter.claims_on()
    run(listen, "SET lock_timeout = '50ms'")
    locker = Listening()  # another session, holding the table
    try:
        with locker.conn.transaction():
            locker.conn.execute("LOCK TABLE django_dbjobs_job IN ACCESS EXCLUSIVE MODE")
            with caplog.at_level("WARNING", logger="django_dbjobs"):
                assert claimer.claim_free_slots() is None
        assert "lock timeout" in caplog.text and "LISTEN connection lost" not in caplog.text
        assert claimer.in_doubt, "it may have committed: what is not held goes back first"
        assert waiter.claims_on() is listen, "the connection is sound: kept"
    finally:
        locker.close()
        run(listen, "RESET lock_timeout")
    assert claimer.claim_free_slots() == 1


def test_a_broken_listen_connection_gives_back_no_rate_limited_job_claimed_before_it(waiter, settings):
    """Every other turn rate-limited jobs are claimed first, and held once the turn's other
    claim is done: that claim breaking its LISTEN connection must not give them back (they
    would run here and again on another worker)."""
    from tests.test_worker_parts import assembled

    settings.DBJOBS_QUEUE_LIMITS = {"rated": {"rate": "7/m"}}
    built = assembled(concurrency=2)
    claimer = built.claimer
    claimer.claims_on, claimer.claim_failed_on = waiter.claims_on, waiter.claim_failed
    rated = enqueue(jobs.rated_start, 1)
    plain = enqueue(jobs.add, 1, 1)
    pid = waiter.claims_on().connection.pgconn.backend_pid
    run(connection, "SELECT pg_terminate_backend(%s)", [pid])
    assert claimer.claim_free_slots() == 2
    assert claimer.held.ids() == {rated.pk, plain.pk} and not claimer.in_doubt
    for job in (rated, plain):
        stored = Job.objects.get(pk=job.pk)
        assert (stored.status, stored.worker) == (JobStatus.RUNNING, built.identity.id), job.name


def test_a_listen_connection_left_with_a_statement_unread_is_closed(waiter, caplog):
    """An error while a claim's results were read (not the server's answer to it) leaves the
    connection sound but busy with a statement nobody will read: closed, as if it broke,
    never used again for the next claim or wait."""
    listen = waiter.claims_on()
    listen.connection.pgconn.send_query(b"SELECT pg_sleep(0.2)")  # sent, its answer never read
    with caplog.at_level("WARNING", logger="django_dbjobs"):
        assert waiter.claim_failed(listen, RuntimeError("interrupted while reading")) is True
    assert "LISTEN connection lost" in caplog.text
    assert waiter.claims_on() is None
    assert waiter.wait(5) is True  # opened again after its pause: a wake-up
    assert run(waiter.claims_on(), "SELECT 1") == [(1,)]


@pytest.mark.parametrize("setting", ["DBJOBS_PREPARED_STATEMENTS", "DISABLE_SERVER_SIDE_CURSORS"])
def test_behind_a_transaction_pooler_claims_stay_on_the_worker_s_own_connection(
    setting, settings, monkeypatch
):
    """A session setting made through a transaction pooler would reach other clients: where
    the server session may not be the connection's own (DISABLE_SERVER_SIDE_CURSORS, or
    DBJOBS_PREPARED_STATEMENTS off), the LISTEN connection only listens."""
    from django.db import connections

    if setting == "DBJOBS_PREPARED_STATEMENTS":
        settings.DBJOBS_PREPARED_STATEMENTS = False
    else:  # the alias's settings, which the LISTEN connection is made from
        monkeypatch.setitem(connections.settings["default"], "DISABLE_SERVER_SIDE_CURSORS", True)
    event = WakeEvent()
    waiter = IdleWaiter("default", event, None)
    waiter.start()
    try:
        assert waiter.listening and waiter.claims_on() is None
        assert run(waiter.listen.connection, "SHOW enable_sort") == [("on",)]
    finally:
        waiter.stop()
        event.close()


def test_the_claim_after_a_wait_trusts_the_paused_queues_read_in_the_listen_session(waiter):
    """No queue paused or resumed was notified since they were read in the LISTEN session
    still open: the claim right after the wait (woken) does not read them again, up to a
    minute later; any other claim reads them once they are a second old."""
    _identity, claimer, threads, *_ = parts()
    claimer.claims_on, claimer.claim_failed_on = waiter.claims_on, waiter.claim_failed
    claimer.paused.listen_session, waiter.on_queues = waiter.listen_session, claimer.paused.changed
    assert claimer.claim_free_slots() == 0  # reads them, in this session
    seen = []

    def paused_reads() -> int:
        return sum("django_dbjobs_queue" in sql for sql in seen)

    with connection.execute_wrapper(lambda execute, sql, *args: seen.append(sql) or execute(sql, *args)):
        claimer.paused._read_at -= 50
        enqueue(jobs.add, 1, 2)
        assert waiter.wait(10) is True
        assert claimer.claim_free_slots(woken=True) == 1
        assert paused_reads() == 0, "trusted"
        claimer.held.remove(threads.take_unstarted())
        enqueue(jobs.add, 3, 4)
        assert claimer.claim_free_slots() == 1
        assert paused_reads() == 1, "not after a wait: read again"
        claimer.held.remove(threads.take_unstarted())
        claimer.paused.changed()  # a notification: a queue was paused or resumed
        enqueue(jobs.add, 5, 6)
        assert claimer.claim_free_slots(woken=True) == 1
        assert paused_reads() == 2, "a change was heard: read again"


def test_a_queue_paused_as_its_jobs_arrive_is_read_again_before_the_woken_claim(waiter):
    """The pause and the job come in one commit (the job's notification first): the wait
    hears both, so the claim right after it (woken) reads the paused queues again instead
    of trusting the list it read before, and takes nothing; a resume wakes it, and its
    claim reads them again and takes the job."""
    from django.db import transaction

    from django_dbjobs.models import Queue

    _identity, claimer, _threads, *_ = parts()
    claimer.claims_on, claimer.claim_failed_on = waiter.claims_on, waiter.claim_failed
    claimer.paused.listen_session, waiter.on_queues = waiter.listen_session, claimer.paused.changed
    assert claimer.claim_free_slots() == 0  # reads them (none paused), in this session
    with transaction.atomic():
        job = enqueue(jobs.add, 1, 2)
        Queue.objects.pause(["default"])
    assert waiter.wait(10) is True
    assert claimer.claim_free_slots(woken=True) == 0
    assert claimer.paused.names == {"default"}
    assert Job.objects.get(pk=job.pk).status == JobStatus.READY
    Queue.objects.resume(["default"])
    assert waiter.wait(10) is True, "a resume wakes the worker"
    time.sleep(0.3)  # past the gap between empty claims while a queue it serves is paused
    assert claimer.claim_free_slots(woken=True) == 1, "and its claim reads the queues again"


def test_claims_never_run_on_a_listen_connection_to_another_alias():
    """IdleWaiter opens it with claims_allowed=False when DBJOBS_LISTEN_DATABASE names another
    alias: it is trusted to hear that database, not to be the worker's own."""
    listen = Listen("default", claims_allowed=False)
    try:
        assert listen.connect() and listen.listening
        assert not listen.claims_here, "heard there, claimed on the worker's own connection"
        enqueue(jobs.add, 1, 2)
        deadline = time.monotonic() + 5
        while not (heard := listen.read()).jobs and time.monotonic() < deadline:
            time.sleep(0.01)
        assert heard.jobs, "it hears the job all the same"
    finally:
        listen.close()
    assert Listen("default").claims_allowed, "the worker's own alias: claims allowed"
