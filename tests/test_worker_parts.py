"""The worker's parts, built and driven without a Worker: each receives what it uses."""

import datetime
import time

import pytest
from django.utils import timezone

from django_dbjobs import enqueue
from django_dbjobs.db.outage import Outage
from django_dbjobs.models import Job, JobStatus, WorkerProcess
from django_dbjobs.worker.claiming.prefetch import Prefetch
from django_dbjobs.worker.identity import Identity, new_worker_id
from django_dbjobs.worker.lifecycle.parts import assemble
from tests import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def parts(queues=()):
    """A worker's parts, wired by lifecycle/parts.py's assemble() as the Worker does, with no Worker."""
    identity = Identity(new_worker_id(), "default", tuple(queues))
    WorkerProcess.objects.create(id=identity.id, hostname="test", pid=1, queues=list(queues), concurrency=1)
    done = []

    def on_done(job, seconds):
        built.held.remove([job])
        done.append((job.pk, seconds))

    built = assemble(
        identity,
        concurrency=1,
        max_jobs=None,
        prefetch=Prefetch(0, 1),
        poll_interval=0.1,
        on_database_error=lambda: None,
        on_done=on_done,
        on_not_stored=lambda: None,
    )
    return identity, built.claimer, built.threads, built.acks, built.lease, built.wake, done


def test_a_claimer_and_job_threads_run_a_job_without_a_worker():
    job = enqueue(jobs.add, 2, 3)
    identity, claimer, threads, acks, _lease, _wake, done = parts()
    assert claimer.claim_free_slots() == 1
    assert Job.objects.get(pk=job.pk).worker == identity.id
    threads.start()
    deadline = time.monotonic() + 10
    while not done and time.monotonic() < deadline:
        time.sleep(0.01)
    acks.flush(force=True)
    threads.stop()
    stored = Job.objects.get(pk=job.pk)
    assert (stored.status, stored.return_value) == (JobStatus.SUCCESSFUL, 5)
    assert [pk for pk, seconds in done] == [job.pk] and done[0][1] is not None


def test_a_claimer_serves_its_identitys_queues_only():
    email = enqueue(jobs.send_email, "a@example.com")
    enqueue(jobs.add, 1, 1)
    _identity, claimer, threads, *_ = parts(queues=["emails"])
    assert claimer.claim_free_slots() == 1
    assert [job.pk for job in threads.take_unstarted()] == [email.pk]


def test_a_lease_drops_the_unstarted_jobs_a_sweep_took_back():
    kept, taken = enqueue(jobs.add, 1, 1), enqueue(jobs.add, 2, 2)
    _identity, claimer, threads, _acks, lease, wake, _done = parts()
    claimer.concurrency = 2  # room for both, none started: no thread runs
    assert claimer.claim_free_slots() == 2
    Job.objects.filter(pk=taken.pk).update(status=JobStatus.READY, worker=None)  # a sweep gave it back
    lease.lost()
    assert wake.is_set() and lease.epoch == 1
    dropped = []
    lease.drop_lost_jobs(threads, Outage("default"), dropped.append)
    assert [job.pk for job in dropped] == [taken.pk]
    assert [job.pk for job in threads.take_unstarted()] == [kept.pk]


def assembled(concurrency: int = 1):
    """A worker's parts with a worker row, as the Worker builds them (no prefetch)."""
    identity = Identity(new_worker_id(), "default", ())
    WorkerProcess.objects.create(id=identity.id, hostname="test", pid=1, queues=[], concurrency=concurrency)
    return assemble(
        identity,
        concurrency=concurrency,
        max_jobs=None,
        prefetch=Prefetch(0, 1),
        poll_interval=0.1,
        on_database_error=lambda: None,
        on_done=lambda job, seconds: None,
        on_not_stored=lambda: None,
    )


def test_a_worker_in_doubt_at_shutdown_gives_back_what_it_owns_and_does_not_hold():
    """A claim committed while its answer was lost: the job is RUNNING under this worker, which
    does not hold it. Shutting down, the worker gives it back (READY, its attempt refunded),
    not leaving it for the sweep that will find the worker's row gone."""
    from django_dbjobs.worker.lifecycle.shutdown import shut_down

    built = assembled()
    job = enqueue(jobs.add, 2, 3)
    before = Job.objects.get(pk=job.pk).attempts
    assert built.claimer.claim_free_slots() == 1
    built.held.remove(built.threads.take_unstarted())  # its answer lost: not held
    built.claimer.in_doubt = True
    shut_down(built, 0)
    stored = Job.objects.get(pk=job.pk)
    assert (stored.status, stored.worker, stored.attempts) == (JobStatus.READY, None, before)
    assert not built.claimer.in_doubt


def test_every_sweep_interval_a_worker_gives_back_what_it_owns_and_does_not_hold(settings):
    """A claim that committed after the worker gave back what it did not hold: RUNNING under a
    live worker. The reconcile gives such a job back (READY, attempt refunded) once claimed a
    while ago by the database clock, and never one it holds, one whose success waits in the
    batch, a stuck one, or one claimed moments ago."""
    settings.DBJOBS_SWEEP_INTERVAL = 60
    built = assembled(concurrency=5)
    names = ["lost", "fresh", "held", "pending", "stuck"]
    enqueued = {name: enqueue(jobs.add, number, 1) for number, name in enumerate(names)}
    assert built.claimer.claim_free_slots() == 5
    taken = {job.pk: job for job in built.threads.take_unstarted()}
    job = {name: taken[enqueued[name].pk] for name in names}
    built.acks.add(job["pending"], 2)  # handed to the batch, then no longer held
    built.held.remove([job["lost"], job["fresh"], job["pending"]])
    built.held.abandon(job["stuck"])
    a_minute_ago = timezone.now() - datetime.timedelta(seconds=60)
    Job.objects.exclude(pk=job["fresh"].pk).update(last_attempted_at=a_minute_ago)  # claimed then
    assert built.reconciler.reconcile_if_due() == 1
    assert built.reconciler.reconcile_if_due() is None, "not again within DBJOBS_SWEEP_INTERVAL"
    stored = {name: Job.objects.get(pk=enqueued[name].pk) for name in names}
    lost = stored["lost"]
    assert (lost.status, lost.worker, lost.attempts) == (JobStatus.READY, None, 0)
    assert [stored[name].status for name in names[1:]] == [JobStatus.RUNNING] * 4
    built.acks.flush(force=True)
    assert Job.objects.get(pk=job["pending"].pk).status == JobStatus.SUCCESSFUL


@pytest.mark.parametrize("how", ["reconcile", "in-doubt"])
def test_a_job_asked_to_stop_that_a_worker_gives_back_as_not_held_is_reported_cancelled(settings, how):
    """Recorded cancelled instead of READY (models/cancelling.py): logged and signalled like
    any cancel, not silently, whichever way the worker gives it back."""
    from django_dbjobs.signals import job_failed

    settings.DBJOBS_SWEEP_INTERVAL = 60
    built = assembled(concurrency=1)
    stored = enqueue(jobs.add, 1, 1)
    assert built.claimer.claim_free_slots() == 1
    (claimed,) = built.threads.take_unstarted()
    built.held.remove([claimed])  # as if its claim's answer never came
    Job.objects.filter(pk=stored.pk).request_cancel()
    Job.objects.filter(pk=stored.pk).update(last_attempted_at=timezone.now() - datetime.timedelta(seconds=60))
    failed = []
    job_failed.connect(receiver := lambda sender, job, error, **kw: failed.append(job.pk), weak=False)
    try:
        if how == "reconcile":
            assert built.reconciler.reconcile_if_due() == 1
        else:
            assert built.claimer.release_unheld() == 1
    finally:
        job_failed.disconnect(receiver)
    assert Job.objects.get(pk=stored.pk).status == JobStatus.FAILED
    assert failed == [stored.pk]


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "recording-failed"])
def test_a_stuck_job_is_never_given_back_as_not_held(keyed, monkeypatch):
    """A stuck job's call runs on: given back, it would run again beside it (and a keyed one
    would free its slot). An in-doubt worker gives back what it does not hold, stuck jobs
    aside: a keyed one is recorded as it exits; one whose recording failed stays the
    worker's, for the sweep once the process is gone."""
    from django_dbjobs.worker.lifecycle.shutdown import shut_down
    from django_dbjobs.worker.running import interrupts, stuck

    built = assembled()
    job = enqueue(jobs.keyed_sleeps_in_c if keyed else jobs.add, *(["a", 60] if keyed else [2, 3]))
    built.admitter.admit_if_due()  # a keyed job waits for its slot
    assert built.claimer.claim_free_slots() == 1
    (taken,) = built.threads.take_unstarted()
    armed = interrupts.Armed(taken, thread=0, seconds=1.0)
    if not keyed:  # its recording fails: the job is still RUNNING under this worker
        monkeypatch.setattr(stuck, "record", lambda *args, **kwargs: 1 / 0)
    stuck.give_up(armed, built.identity.id, built.outage, built.held, 0, built.stuck)
    assert not built.held
    built.claimer.in_doubt = True
    assert built.claimer.release_unheld() == 0
    stored = Job.objects.get(pk=job.pk)
    assert (stored.status, stored.worker) == (JobStatus.RUNNING, built.identity.id)
    shut_down(built, 0)
    stored = Job.objects.get(pk=job.pk)
    if keyed:  # recorded at the very end: a timeout, its retry later
        assert (stored.status, stored.attempts) == (JobStatus.READY, 1)
        assert "timeout" in stored.last_error and stored.run_at > timezone.now()
    else:
        assert (stored.status, stored.worker) == (JobStatus.RUNNING, built.identity.id)
