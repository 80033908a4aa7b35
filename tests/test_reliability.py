"""Failures as they happen: kill -9, SIGSTOP, poison jobs, skewed clocks, database restarts.

Test settings: heartbeat every 0.2 s, timeout 1.5 s, sweep every 0.3 s, so the
recovery bound (timeout + sweep interval) is 1.8 s plus a poll.
"""

import collections
import datetime
import random
import signal
import time

import pytest
from django.db import connection, transaction
from django.db.models import F
from django.db.models.functions import Now
from django.utils import timezone

from django_dbjobs import bulk_enqueue, enqueue, prepare
from django_dbjobs.models import Job, JobStatus, WorkerProcess
from tests import jobs
from tests.conftest import freeze, restart_database, server_answers, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def running_under(job, timeout=20):
    """Wait until `job` is RUNNING and return the worker id holding it."""
    assert wait_for(lambda: Job.objects.filter(pk=job.pk, status=JobStatus.RUNNING).exists(), timeout)
    return Job.objects.get(pk=job.pk).worker


def test_job_of_a_killed_worker_runs_again_on_another_within_the_bound(run_jobs, record_file):
    job = enqueue(jobs.sleep_then_record, 1.5, "once-more")
    first = run_jobs()
    first_id = running_under(job)
    first.process.kill()  # SIGKILL: no cleanup at all
    first.process.wait()
    killed_at = time.monotonic()
    second = run_jobs()
    # The bound counts from when a live worker could sweep: the kill, or the second worker's
    # start if it came later (a process start alone takes seconds on a loaded machine).
    assert wait_for(lambda: WorkerProcess.objects.exclude(pk=first_id).exists(), 30), second.output()
    sweepable_at = max(killed_at, time.monotonic())
    assert wait_for(lambda: Job.objects.filter(pk=job.pk, status=JobStatus.SUCCESSFUL).exists(), 20)
    recovered_in = time.monotonic() - sweepable_at
    assert recovered_in < 1.5 + 0.3 + 1.5 + 3, f"took {recovered_in:.1f}s"  # bound + the job itself + slack
    second.signal()
    assert second.wait() == 0
    job.refresh_from_db()
    # Nobody knew the job had started when its worker died: it went back uncharged,
    # ran alone on the second worker, and succeeded at its first charged attempt.
    assert (job.attempts, job.pickups, job.errors, job.isolation) == (1, 2, [], "")
    assert record_file.read_text() == "once-more\n", "the killed run never finished; only the rerun did"


def test_frozen_worker_wakes_to_find_its_outcome_dropped(run_jobs, record_file):
    job = enqueue(jobs.announce_sleep_record, 2.5, "x")
    frozen = run_jobs()
    frozen_id = running_under(job)
    # RUNNING is written by the claim; wait until the job's function has really begun, else
    # the woken worker rightly refuses to start a job whose lease it lost.
    assert wait_for(lambda: record_file.exists() and "started:x" in record_file.read_text(), 20)
    freeze(frozen)
    other = run_jobs()
    assert wait_for(
        lambda: Job.objects.filter(pk=job.pk, status=JobStatus.RUNNING).exclude(worker=frozen_id).exists(),
        20,
    ), "the frozen worker's job was not taken over"
    new_owner = Job.objects.get(pk=job.pk).worker
    frozen.signal(signal.SIGCONT)  # its thread finishes the old attempt first
    assert wait_for(lambda: Job.objects.filter(pk=job.pk, status=JobStatus.SUCCESSFUL).exists(), 20)
    for worker in (frozen, other):
        worker.signal()
        assert worker.wait() == 0
    job.refresh_from_db()
    assert job.worker_ids == [new_owner] and job.worker == new_owner
    assert (job.attempts, job.pickups) == (1, 2), "the frozen pickup was given back uncharged"
    # both ran: at least once, finalised once
    assert sorted(record_file.read_text().split()) == ["started:x", "started:x", "x", "x"]
    assert "Job outcome dropped" in frozen.output()


def test_a_claim_committed_behind_a_live_workers_back_is_given_back_and_runs(run_jobs):
    """A claim that commits after its worker gave back what it did not hold (a PostgreSQL
    LISTEN connection broken mid-claim, the server running on): its job is RUNNING under a
    live, heartbeating worker, which no sweep judges. The worker itself gives it back within
    a sweep interval, its attempt refunded, and runs it."""
    job = enqueue(jobs.add, 2, 3, delay=3600)  # not due: the worker never claims it itself
    worker = run_jobs("--poll-interval", "0.1")
    row = WorkerProcess.objects.filter(pid=worker.process.pid)
    assert wait_for(row.exists, 30), worker.output()
    worker_id = row.get().pk
    a_minute_ago = timezone.now() - datetime.timedelta(seconds=60)
    # What a claim writes (db/claims.py claim_mark()), committed from here, a minute old.
    committed = Job.objects.filter(pk=job.pk, status=JobStatus.READY).update(
        status=JobStatus.RUNNING,
        worker=worker_id,
        attempts=F("attempts") + 1,
        pickups=F("pickups") + 1,
        worker_ids=[worker_id],
        run_at=a_minute_ago,
        started_at=a_minute_ago,
        last_attempted_at=a_minute_ago,
    )
    assert committed == 1
    committed_at = time.monotonic()
    assert wait_for(lambda: Job.objects.filter(pk=job.pk, status=JobStatus.SUCCESSFUL).exists(), 20), (
        "still RUNNING under a live worker that does not hold it\n" + worker.output()
    )
    took = time.monotonic() - committed_at
    assert took < 0.3 + 0.1 + 3, f"took {took:.1f}s"  # sweep interval + a poll + slack
    assert WorkerProcess.objects.filter(pk=worker_id).exists(), "given back by its live worker, not a sweep"
    worker.signal()
    assert worker.wait() == 0
    job.refresh_from_db()
    assert (job.return_value, job.attempts, job.pickups, job.worker_ids) == (5, 1, 2, [worker_id])
    assert "Jobs this worker did not hold released count=1" in worker.output()


def test_poison_job_is_dead_lettered_after_max_attempts_charged_pickups(run_jobs):
    job = enqueue(jobs.kill_own_worker)  # max_attempts=3
    pickups = 0
    deadline = time.monotonic() + 60
    while not Job.objects.filter(pk=job.pk, status=JobStatus.FAILED).exists():
        assert time.monotonic() < deadline, "the poison job was never dead-lettered"
        worker = run_jobs("--poll-interval", "0.1")
        assert wait_for(
            lambda worker=worker: (
                worker.process.poll() is not None
                or Job.objects.filter(pk=job.pk, status=JobStatus.FAILED).exists()
            ),
            20,
        )
        if worker.process.poll() is None:  # this one swept the job into the dead letters
            worker.signal()
            assert worker.wait() == 0
        else:
            assert worker.process.returncode == -signal.SIGKILL
            pickups += 1
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    # The first death is nobody's fault as far as the database knows (the job had not
    # recorded its start); from then on it runs alone and each death is its own.
    assert pickups == 4 and job.attempts == 3 and job.pickups == 4
    assert len(job.errors) == 3 and all("WorkerLost" in e["summary"] for e in job.errors)


def test_system_exit_and_os_exit_from_jobs(run_jobs):
    exits = enqueue(jobs.raises_system_exit)  # max_attempts=2
    after = enqueue(jobs.add, 1, 1, priority=-1)
    worker = run_jobs("--poll-interval", "0.1")
    assert wait_for(lambda: Job.objects.filter(pk=after.pk, status=JobStatus.SUCCESSFUL).exists(), 20)
    assert wait_for(lambda: Job.objects.filter(pk=exits.pk, status=JobStatus.FAILED).exists(), 20)
    assert worker.process.poll() is None, "SystemExit in a job must not stop the worker"
    worker.signal()
    assert worker.wait() == 0


def test_skewed_host_clock_neither_steals_live_jobs_nor_runs_future_jobs_early(run_jobs, record_file):
    live = enqueue(jobs.sleep_then_record, 4, "live")
    honest = run_jobs()
    owner = running_under(live)
    with transaction.atomic():  # due in 10 minutes by the database clock, from the start
        future = Job.objects.create(name="tests.jobs.add", args=[1, 1])
        Job.objects.filter(pk=future.pk).update(run_at=Now() + datetime.timedelta(minutes=10))
    ahead = run_jobs("--burst", env={"DBJOBS_TEST_CLOCK_SKEW": "3600"})
    assert ahead.wait() == 0, ahead.output()
    behind = run_jobs("--burst", env={"DBJOBS_TEST_CLOCK_SKEW": "-3600"})
    assert behind.wait() == 0, behind.output()
    assert Job.objects.get(pk=future.pk).status == JobStatus.READY
    assert Job.objects.get(pk=live.pk).worker == owner
    assert wait_for(lambda: Job.objects.filter(pk=live.pk, status=JobStatus.SUCCESSFUL).exists(), 20)
    assert Job.objects.get(pk=live.pk).attempts == 1
    honest.signal()
    assert honest.wait() == 0


def test_random_kill_9_while_draining_loses_nothing(run_jobs, record_file):
    total = 3000
    bulk_enqueue(prepare(jobs.record, i) for i in range(total))
    workers = [run_jobs("--concurrency", "2", "--poll-interval", "0.1", "-v", "0") for _ in range(3)]
    rng = random.Random(7)
    may_repeat = set()
    for _ in range(4):
        time.sleep(1.0)
        victim = workers.pop(rng.randrange(len(workers)))
        pid = victim.process.pid
        victim.process.kill()
        victim.process.wait()
        ids = WorkerProcess.objects.filter(pid=pid).values_list("pk", flat=True)
        may_repeat |= {
            str(args[0])
            for args in Job.objects.filter(worker__in=list(ids), status=JobStatus.RUNNING).values_list(
                "args", flat=True
            )
        }
        workers.append(run_jobs("--concurrency", "2", "--poll-interval", "0.1", "-v", "0"))
    assert wait_for(lambda: Job.objects.filter(status=JobStatus.SUCCESSFUL).count() == total, 180)
    for worker in workers:
        worker.signal()
        assert worker.wait() == 0
    runs = collections.Counter(record_file.read_text().split())
    assert len(runs) == total, "a job was lost"
    repeated = {value for value, count in runs.items() if count > 1}
    assert repeated <= may_repeat, f"ran twice without a kill: {sorted(repeated - may_repeat)[:10]}"


@pytest.mark.restarts_database
def test_database_restart_while_draining_loses_nothing(run_jobs, record_file):
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no server to restart")
    total = 1500
    bulk_enqueue(prepare(jobs.sleep_then_record, 0.002, i) for i in range(total))
    workers = [run_jobs("--concurrency", "2", "--poll-interval", "0.1") for _ in range(2)]
    assert wait_for(lambda: Job.objects.filter(status=JobStatus.SUCCESSFUL).count() > 100, 60)
    restart_database()
    assert wait_for(
        lambda: server_answers() and Job.objects.filter(status=JobStatus.SUCCESSFUL).count() == total, 120
    ), "processing did not resume"
    for worker in workers:
        assert worker.process.poll() is None, "a worker died in the outage:\n" + worker.output()
        worker.signal()
        assert worker.wait() == 0
    runs = collections.Counter(record_file.read_text().split())
    assert len(runs) == total
    assert "Database error" in "".join(w.output() for w in workers)
