"""PostgreSQL: an idle worker's claim is sent the moment a notification is read (claim_ahead.py).

The claim is made ready before the wait, sent by the idle waiter as it reads the
notification, and read where the loop claims. What it took is never lost: it is held
when the loop does not claim, given back at shutdown, held before jobs not held are
given back, given back if the LISTEN connection breaks under it; and a claim whose
prepared statement has gone from the session runs again as usual.
"""

import time

import pytest
from django.db import connection
from django.utils import timezone

from django_dbjobs import db, enqueue
from django_dbjobs.models import Job, JobStatus
from tests import jobs
from tests.test_claims_on_listen import run
from tests.test_worker_parts import parts

pytestmark = [
    pytest.mark.skipif(not db.supports_listen(), reason="LISTEN exists on PostgreSQL only"),
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture
def wired(waiter):
    """A claimer wired to a listening waiter as Worker.run() wires them; its claim statement
    already prepared on the LISTEN connection (by a first claim, which found nothing), the
    paused queues read in the LISTEN session (trusted while it lasts: paused_queues.py)."""
    identity, claimer, threads, *_ = parts()
    claimer.claims_on, claimer.claim_failed_on = waiter.claims_on, waiter.claim_failed
    waiter.on_jobs = claimer.ahead.send
    claimer.paused.listen_session, waiter.on_queues = waiter.listen_session, claimer.paused.changed
    assert claimer.claim_free_slots() == 0
    return identity, claimer, threads, waiter


def sent_on_notification(claimer, waiter, runs: bool = True) -> Job:
    """Arm, enqueue from another connection, and wait: the claim leaves as the waiter reads
    the notification, and (if it `runs`) commits on the server with nobody reading its answer."""
    claimer.ahead.arm()
    job = enqueue(jobs.add, 1, 2)  # autocommit: committed, notified
    assert waiter.wait(10) is True
    claimer.ahead.disarm()
    assert claimer.ahead.flight is not None, "sent when the notification was read"
    deadline = time.monotonic() + (10 if runs else 0.3)
    while Job.objects.get(pk=job.pk).status != JobStatus.RUNNING and time.monotonic() < deadline:
        time.sleep(0.01)
    return job


def test_a_notification_sends_the_claim_and_the_loop_s_claim_reads_it(wired):
    identity, claimer, threads, waiter = wired
    job = sent_on_notification(claimer, waiter)
    stored = Job.objects.get(pk=job.pk)
    assert (stored.status, stored.worker, stored.attempts) == (JobStatus.RUNNING, identity.id, 1)
    with connection.execute_wrapper(lambda *args: pytest.fail("the claim read ran a statement")):
        assert claimer.claim_free_slots() == 1
    assert claimer.ahead.flight is None
    (taken,) = threads.take_unstarted()
    assert (taken.pk, taken.args, taken.status, taken.worker) == (job.pk, [1, 2], "RUNNING", identity.id)
    assert claimer.held.ids() == {job.pk}


def test_nothing_is_sent_without_a_notification_of_jobs_or_once_the_wait_is_over(wired):
    from tests.test_wakeup import notify

    _identity, claimer, _threads, waiter = wired
    claimer.ahead.arm()
    notify("schedules")  # a schedule changed: no claim for that
    assert waiter.wait(10) is True
    assert claimer.ahead.flight is None
    claimer.ahead.disarm()
    job = enqueue(jobs.add, 1, 2)
    assert waiter.wait(10) is True
    assert claimer.ahead.flight is None, "disarmed: the loop claims as usual"
    assert claimer.claim_free_slots() == 1 and claimer.held.ids() == {job.pk}


def test_a_claim_sent_that_the_loop_did_not_read_is_held_at_its_next_turn(wired):
    identity, claimer, threads, waiter = wired
    epoch = claimer.lease.epoch
    job = sent_on_notification(claimer, waiter)
    claimer.lease.lost()  # the epoch changed after the claim was sent: its jobs are checked first
    claimer.ahead.land()
    (taken,) = threads.take_unstarted()
    assert taken.pk == job.pk and taken._lease_epoch == epoch
    assert claimer.held.ids() == {job.pk} and claimer.claimed == 1
    assert Job.objects.get(pk=job.pk).worker == identity.id


def test_at_shutdown_what_a_claim_sent_took_goes_back(wired):
    _identity, claimer, threads, waiter = wired
    job = sent_on_notification(claimer, waiter)
    claimer.ahead.land(release=True)
    stored = Job.objects.get(pk=job.pk)
    assert (stored.status, stored.attempts, stored.worker) == (JobStatus.READY, 0, None)
    assert threads.take_unstarted() == [] and not claimer.held


def test_an_in_doubt_worker_with_no_free_slot_holds_a_claim_sent_and_gives_back_the_rest(wired):
    """A job thread set in_doubt while the claim was out: the next turn gives back what the
    worker does not hold even with no free slot, but never what the claim took (it would run
    a job this worker no longer owns)."""
    identity, claimer, threads, waiter = wired
    job = sent_on_notification(claimer, waiter)
    other = enqueue(jobs.add, 3, 4)
    Job.objects.filter(pk=other.pk).update(status=JobStatus.RUNNING, worker=identity.id, attempts=1)
    claimer.in_doubt = True  # `other`: a claim that committed while its answer was lost
    assert claimer.claim_free_slots() == 0, "the one slot is taken by the job held first"
    stored = Job.objects.get(pk=other.pk)
    assert (stored.status, stored.worker, stored.attempts) == (JobStatus.READY, None, 0), "given back"
    assert not claimer.in_doubt
    stored = Job.objects.get(pk=job.pk)
    assert (stored.status, stored.worker) == (JobStatus.RUNNING, identity.id)
    assert [taken.pk for taken in threads.take_unstarted()] == [job.pk]


def test_whoever_gives_back_jobs_not_held_holds_a_claim_sent_first(wired):
    """release_unheld() runs from the loop's claim, from a claim whose LISTEN connection broke,
    and at shutdown; a job thread may set in_doubt at any moment while a claim is out. In every
    case what that claim took is held first, never given back for another worker to run."""
    identity, claimer, threads, waiter = wired
    job = sent_on_notification(claimer, waiter)
    assert claimer.release_unheld() == 0
    assert claimer.ahead.flight is None and claimer.held.ids() == {job.pk}
    stored = Job.objects.get(pk=job.pk)
    assert (stored.status, stored.worker) == (JobStatus.RUNNING, identity.id)
    assert [taken.pk for taken in threads.take_unstarted()] == [job.pk]


def test_a_claim_sent_on_a_connection_that_then_broke_runs_on_the_worker_s_own_at_once(wired, caplog):
    """The LISTEN connection is cut while the claim sent on it waits for a lock: not an outage.
    The claim runs on the worker's own connection at once (the one sent had not run: the lock
    held it); what a claim that committed and lost its answer took goes back once what the
    claim on the worker's own connection took is held (see the next test)."""
    from tests.test_wakeup import Listening

    identity, claimer, threads, waiter = wired
    job = enqueue(jobs.add, 1, 2)  # its notification waits in the socket
    claimer.ahead.arm()
    locker = Listening()  # another session, holding the table: the claim sent waits
    try:
        with locker.conn.transaction():
            locker.conn.execute("LOCK TABLE django_dbjobs_job IN ACCESS EXCLUSIVE MODE")
            assert waiter.wait(10) is True and claimer.ahead.flight is not None
            pid = waiter.claims_on().connection.pgconn.backend_pid
            run(connection, "SELECT pg_terminate_backend(%s)", [pid])
    finally:
        locker.close()
    with caplog.at_level("WARNING", logger="django_dbjobs"):
        assert claimer.claim_free_slots() == 1
    assert "LISTEN connection lost" in caplog.text
    assert "Database error" not in caplog.text, "no outage, no pause"
    assert not claimer.in_doubt and waiter.claims_on() is None, "jobs not held given back: none"
    stored = Job.objects.get(pk=job.pk)
    assert (stored.status, stored.worker, stored.attempts) == (JobStatus.RUNNING, identity.id, 1)
    assert [taken.pk for taken in threads.take_unstarted()] == [job.pk]


def test_a_claim_sent_whose_prepared_statement_had_gone_runs_again_as_usual(wired, caplog):
    identity, claimer, threads, waiter = wired
    run(waiter.claims_on(), "DEALLOCATE ALL")  # the session lost it; the worker does not know
    with caplog.at_level("INFO", logger="django_dbjobs"):
        job = sent_on_notification(claimer, waiter, runs=False)
        assert Job.objects.get(pk=job.pk).status == JobStatus.READY, "it failed before running"
        assert claimer.claim_free_slots() == 1
    assert "prepares no more" not in caplog.text, "one loss is forgiven"
    assert Job.objects.get(pk=job.pk).worker == identity.id
    assert [taken.pk for taken in threads.take_unstarted()] == [job.pk]


def test_no_claim_is_made_ready_for_a_worker_with_paused_or_rate_limited_queues_or_in_doubt(wired, settings):
    from django_dbjobs.models import Queue

    _identity, claimer, _threads, _waiter = wired
    claimer.ahead.arm()
    assert claimer.ahead._ready is not None, "the premise: a plain idle worker makes it ready"
    claimer.in_doubt = True
    claimer.ahead.arm()
    assert claimer.ahead._ready is None
    claimer.in_doubt = False
    settings.DBJOBS_QUEUE_LIMITS = {"rated": {"rate": "5/m"}}
    claimer.ahead.arm()
    assert claimer.ahead._ready is None, "its claims take turns with the rate-limited queues'"
    settings.DBJOBS_QUEUE_LIMITS = {}
    claimer.ahead.arm()
    assert claimer.ahead._ready is not None
    Queue.objects.create(name="default", paused_at=timezone.now())
    claimer.paused._read_at = None  # read again now
    claimer.paused.current()
    claimer.ahead.arm()
    assert claimer.ahead._ready is None, "paused: the claim gap and the walk past a paused backlog apply"


def test_a_claim_made_ready_for_more_slots_than_are_free_now_is_not_sent(wired):
    """Fewer slots are free than when it was made ready (here --max-jobs reached during the
    wait): it would take too many; the loop claims."""
    _identity, claimer, _threads, waiter = wired
    claimer.ahead.arm()
    claimer.max_jobs = claimer.claimed  # no slot left
    job = enqueue(jobs.add, 1, 2)
    assert waiter.wait(10) is True
    assert claimer.ahead.flight is None
    time.sleep(0.2)
    assert Job.objects.get(pk=job.pk).status == JobStatus.READY


def test_a_prefetch_that_lapses_during_the_wait_leaves_the_claim_ready_for_the_free_threads(wired):
    """The claim made ready asks for the free threads only: a prefetch lapses a tenth of a
    second after the last job (prefetch.py), and a claim for slots no longer free could not
    be sent, leaving the first wake-up after an idle moment to the slow path."""
    from django.db import transaction

    from django_dbjobs.worker.claiming.prefetch import Prefetch

    _identity, claimer, threads, waiter = wired
    claimer.prefetch = Prefetch(100, 1)
    claimer.prefetch.job_finished(0.001)  # a fast job just ended: a prefetch of 100
    assert claimer.free_slots() == 101
    claimer.ahead.arm()
    claimer.prefetch._last -= 1  # lapsed during the wait
    assert claimer.free_slots() == 1
    with transaction.atomic():
        for n in range(3):
            enqueue(jobs.add, n, n)
    assert waiter.wait(10) is True
    assert claimer.ahead.flight is not None and claimer.ahead.flight.limit == 1
    assert claimer.claim_free_slots() == 1
    assert not claimer.came_short, "as many as it asked for: more may wait"


def test_a_full_claim_sent_for_the_threads_is_not_short_of_a_live_prefetch(wired):
    from django.db import transaction

    from django_dbjobs.worker.claiming.prefetch import Prefetch

    _identity, claimer, threads, waiter = wired
    claimer.prefetch = Prefetch(100, 1)
    claimer.prefetch.WINDOW = 3600  # it lapses a tenth of a second after the job otherwise
    claimer.prefetch.job_finished(0.001)
    claimer.ahead.arm()
    with transaction.atomic():
        for n in range(3):
            enqueue(jobs.add, n, n)
    assert waiter.wait(10) is True
    assert claimer.ahead.flight.limit == 1, "the free thread, not the prefetch"
    assert claimer.claim_free_slots() == 1
    assert not claimer.came_short, "the loop claims again at once, the prefetch with it"
    assert len(threads.take_unstarted()) == 1  # a thread took it: the threads' queue is empty
    assert claimer.claim_free_slots() == 2
    assert claimer.came_short


def test_paused_queues_read_in_the_listen_session_are_trusted_up_to_a_minute(wired):
    """No queue paused or resumed was notified since: the first wake-up after idle seconds
    sends its claim at once, without reading them again."""
    _identity, claimer, _threads, waiter = wired
    claimer.paused._read_at -= 50
    with connection.execute_wrapper(lambda *args: pytest.fail("the paused queues were read again")):
        claimer.ahead.arm()
    enqueue(jobs.add, 1, 2)
    assert waiter.wait(10) is True
    assert claimer.ahead.flight is not None
    assert claimer.claim_free_slots() == 1


def test_paused_queues_read_more_than_a_second_ago_outside_the_listen_session_are_read_again(wired):
    _identity, claimer, _threads, waiter = wired
    claimer.ahead.arm()
    claimer.paused._read_at -= 50  # a long wait, and the list was read in an earlier
    claimer.paused._read_in -= 1  # LISTEN session: a pause may have gone unheard
    enqueue(jobs.add, 1, 2)
    assert waiter.wait(10) is True
    assert claimer.ahead.flight is None, "the loop's claim reads them again"
    assert claimer.claim_free_slots() == 1


def test_a_queue_paused_as_its_jobs_arrive_is_read_again_before_any_claim(wired):
    """The pause and the job come in one read (here one commit, the job's notification
    first): the read takes the pause into account before it sends the claim made ready
    with the old list, which it then does not send."""
    from django.db import transaction

    from django_dbjobs.models import Queue

    _identity, claimer, _threads, waiter = wired
    claimer.ahead.arm()
    with transaction.atomic():
        job = enqueue(jobs.add, 1, 2)
        Queue.objects.pause(["default"])
    assert waiter.wait(10) is True
    claimer.ahead.disarm()
    assert claimer.ahead.flight is None
    assert claimer.claim_free_slots() == 0
    assert claimer.paused.names == {"default"}
    assert Job.objects.get(pk=job.pk).status == JobStatus.READY
    Queue.objects.resume(["default"])
    assert waiter.wait(10) is True, "a resume wakes the worker"
    time.sleep(0.3)  # past the gap between empty claims while a queue it serves is paused
    assert claimer.claim_free_slots() == 1, "and its claim reads the queues again"


def test_a_claim_sent_for_more_slots_than_are_free_now_gives_the_rest_back(wired):
    identity, claimer, threads, waiter = wired
    job = sent_on_notification(claimer, waiter)
    assert claimer.claim(0) == []
    stored = Job.objects.get(pk=job.pk)
    assert (stored.status, stored.worker, stored.attempts) == (JobStatus.READY, None, 0)
    assert claimer.ahead.flight is None and not claimer.held


def test_a_claim_sent_the_loop_did_not_read_is_held_only_as_far_as_slots_are_free(wired):
    """The loop did not claim (no free slot now: a prefetch lapsed, a job was held meanwhile):
    what the claim took beyond the free slots goes back at once, attempts refunded."""
    identity, claimer, threads, waiter = wired
    job = sent_on_notification(claimer, waiter)
    busy = enqueue(jobs.add, 5, 6)
    claimer.held.add([busy])  # the one slot is taken since the claim was sent
    claimer.ahead.land()
    stored = Job.objects.get(pk=job.pk)
    assert (stored.status, stored.worker, stored.attempts) == (JobStatus.READY, None, 0)
    assert claimer.held.ids() == {busy.pk} and threads.take_unstarted() == []


def test_a_claim_sent_that_got_no_answer_gives_up_its_connection_not_the_worker_s(wired, caplog, monkeypatch):
    """No answer at all to a claim sent ahead: it may have committed. Not an outage (the
    worker's own connection is sound): the LISTEN connection is given up, the claim runs on
    the worker's own, and what the one sent took goes back at once."""
    identity, claimer, threads, waiter = wired
    job = sent_on_notification(claimer, waiter)
    raw = claimer.ahead.flight.sent.ready.raw
    monkeypatch.setattr(raw, "wait", lambda generator: [])
    with caplog.at_level("WARNING", logger="django_dbjobs"):
        assert claimer.claim_free_slots() == 0, "the claim sent took it: the one on its own finds none"
    assert "LISTEN connection lost" in caplog.text and "Database error" not in caplog.text
    assert waiter.claims_on() is None and not claimer.in_doubt
    stored = Job.objects.get(pk=job.pk)
    assert (stored.status, stored.worker, stored.attempts) == (JobStatus.READY, None, 0), "given back"
    assert claimer.claim_free_slots() == 1 and claimer.held.ids() == {job.pk}
