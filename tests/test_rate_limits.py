"""Rate limits per queue (flow/rates.py): the setting, the slots, and real workers over a minute."""

import signal
import threading
import time

import pytest
from django.core import checks
from django.db import connections

from django_dbjobs import enqueue
from django_dbjobs.flow.rates import Rate, RateLimitedClaims, setting_problems, slots_in_use, sync_blocked
from django_dbjobs.models import Blocked, Job, JobStatus, RateSlot
from django_dbjobs.testing import run_jobs as run_jobs_here
from tests import jobs
from tests.conftest import wait_for


@pytest.mark.parametrize(
    ("text", "count", "period"),
    [
        ("100/m", 100, 60),
        ("20/10s", 20, 10),
        ("1/2.5s", 1, 2.5),
        ("5000/h", 5000, 3600),
        (" 3 / d ", 3, 86400),
    ],
)
def test_a_rate_is_read_as_starts_per_period(text, count, period):
    assert Rate.parse(text) == Rate(count, period)


@pytest.mark.parametrize("text", ["100", "100/", "0/m", "10/0s", "100/w", "-1/m", 100, None, "10001/s"])
def test_a_malformed_rate_is_refused(text):
    with pytest.raises(ValueError, match="rate must"):
        Rate.parse(text)


def test_the_check_names_each_problem_of_the_setting(settings):
    assert setting_problems({"emails": {"rate": "100/m"}}) == []
    assert setting_problems([]) == ["DBJOBS_QUEUE_LIMITS must be a dict of queue names to limits, not []."]
    problems = setting_problems({"bad name": {"rate": "1/s"}, "a": {"rate": "x"}, "b": {"burst": 3}})
    assert len(problems) == 3 and "'bad name' is not a queue name" in problems[0]
    settings.DBJOBS_QUEUE_LIMITS = {"emails": {"rate": "often"}}
    found = [e for e in checks.run_checks() if e.id == "dbjobs.E031"]
    assert len(found) == 1 and "DBJOBS_QUEUE_LIMITS['emails']: rate must look like" in found[0].msg


@pytest.fixture
def rated(settings):
    settings.DBJOBS_QUEUE_LIMITS = {"rated": {"rate": "7/m"}}


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("rated")
def test_claims_on_their_own_connections_take_no_more_than_the_rate():
    for n in range(30):
        enqueue(jobs.rated_start, n)
    rate, taken, errors = Rate(7, 60), [], []
    barrier = threading.Barrier(3)

    def claim(worker):
        claims = RateLimitedClaims(worker, "default")
        try:
            barrier.wait()
            for _ in range(4):
                taken.extend(claims.claim("rated", rate, 3, include_waiting=True))
                claims._next_try.clear()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claim, args=(f"w{n}",)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(taken) == 7 and len({j.pk for j in taken}) == 7
    assert Job.objects.filter(status=JobStatus.RUNNING).count() == 7
    assert slots_in_use("rated", rate, "default") == 7
    assert RateSlot.objects.filter(queue="rated").count() == 7


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("rated")
def test_a_claim_stamps_only_the_slots_it_used():
    enqueue(jobs.rated_start, 1)
    claims = RateLimitedClaims("w1", "default")
    assert len(claims.claim("rated", Rate(5, 60), 3, include_waiting=True)) == 1
    assert slots_in_use("rated", Rate(5, 60), "default") == 1


@pytest.mark.django_db(transaction=True)
def test_three_workers_never_start_more_than_the_rate_in_any_window(run_jobs, record_file):
    """20 starts per 10 s, 3 workers, 100 starts (42 s at best, 60 s allowed): no 10 s window
    of the job starts holds more than 20."""
    for n in range(150):
        enqueue(jobs.rated_start, n)
    for n in range(10):
        enqueue(jobs.unkeyed_span, n)  # another queue: not held up by the rate
    env = {"DBJOBS_TEST_QUEUE_LIMITS": '{"rated": {"rate": "20/10s"}}'}
    began = time.time()
    workers = [run_jobs("--concurrency", "2", env=env) for _ in range(3)]
    rated_jobs = Job.objects.filter(name="tests.jobs.rated_start")
    wait_for(lambda: rated_jobs.filter(status=JobStatus.SUCCESSFUL).count() >= 100, timeout=60, interval=0.5)
    for worker in workers:
        worker.signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait() == 0, worker.output()
    lines = [line.split() for line in record_file.read_text().splitlines()]
    rated = sorted(float(at) for kind, _, _, at in lines if kind == "rated")
    unkeyed = Job.objects.filter(name="tests.jobs.unkeyed_span")
    assert unkeyed.filter(status=JobStatus.SUCCESSFUL).count() == 10
    started = rated_jobs.filter(status=JobStatus.SUCCESSFUL).count()
    windows = [sum(1 for t in rated if start <= t < start + 10) for start in rated]
    assert max(windows) <= 20, max(windows)
    # The rate is used, not only respected: 100 starts within 60 s (six windows of 20 fit).
    assert started >= 100, (started, rated[0] - began)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("rated")
def test_jobs_of_a_rate_limited_queue_wait_outside_the_claim_and_go_back_there():
    rated = enqueue(jobs.rated_start, 1)
    plain = enqueue(jobs.add, 1, 2)
    assert Job.objects.get(pk=rated.pk).blocked == Blocked.RATE
    assert [j.pk for j in Job.objects.claim("w1", limit=10)] == [plain.pk]  # the other claims skip it
    (claimed,) = RateLimitedClaims("w1", "default").claim("rated", Rate(7, 60), 5, include_waiting=True)
    assert (claimed.pk, claimed.status, claimed.blocked) == (rated.pk, JobStatus.RUNNING, Blocked.NONE)
    assert Job.objects.get(pk=rated.pk).blocked == Blocked.NONE
    assert claimed.mark_for_retry("w1", {"summary": "x"}, delay=0)  # back to READY: waits for the rate again
    assert Job.objects.get(pk=rated.pk).blocked == Blocked.RATE


@pytest.mark.django_db(transaction=True)
def test_a_worker_start_applies_the_setting_to_jobs_already_waiting(settings):
    before = enqueue(jobs.rated_start, 1)  # no limit yet
    assert Job.objects.get(pk=before.pk).blocked == Blocked.NONE
    settings.DBJOBS_QUEUE_LIMITS = {"rated": {"rate": "7/m"}}
    assert sync_blocked("default") == 1
    assert Job.objects.get(pk=before.pk).blocked == Blocked.RATE
    settings.DBJOBS_QUEUE_LIMITS = {}
    assert sync_blocked("default") == 1
    assert Job.objects.get(pk=before.pk).blocked == Blocked.NONE


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("rated")
def test_testing_run_jobs_runs_rate_limited_jobs_at_once(record_file):
    for n in range(10):
        enqueue(jobs.rated_start, n)
    assert len(run_jobs_here()) == 10


@pytest.mark.django_db(transaction=True)
def test_a_rate_limited_backlog_does_not_starve_the_other_queues(run_jobs, record_file):
    for n in range(10):
        enqueue(jobs.rated_sleep, 2, n)
    env = {"DBJOBS_TEST_QUEUE_LIMITS": '{"rated": {"rate": "1000/m"}}'}
    worker = run_jobs("--concurrency", "2", env=env)
    assert wait_for(lambda: record_file.read_text().count("rated - ") >= 2, timeout=20)
    other = enqueue(jobs.add, 1, 2)
    # The worker's two threads free up every 2 s: the other queue gets one of them.
    assert wait_for(lambda: Job.objects.get(pk=other.pk).status == JobStatus.SUCCESSFUL, timeout=6)
    Job.objects.filter(name=jobs.rated_sleep.name).cancel()
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("rated_first", [False, True], ids=["ordinary-first", "rated-first"])
def test_no_rate_slot_is_stamped_for_a_job_that_would_wait_for_one_running_alone(settings, rated_first):
    """A rate-limited job claimed beside a job that must run alone would wait at its gate,
    its slot stamped at the claim: the rate must count starts. Either the job that must run
    alone waits for a later turn, or the rate-limited job does, its slot unused."""
    from django_dbjobs.models import Isolation
    from django_dbjobs.worker import Worker

    settings.DBJOBS_QUEUE_LIMITS = {"rated": {"rate": "1/2s"}}
    alone = enqueue(jobs.add, 1, 2)
    Job.objects.filter(pk=alone.pk).update(isolation=Isolation.WAITING)  # recovered from a dead worker
    limited = enqueue(jobs.rated_start, 1)
    worker = Worker(concurrency=2)
    worker.claimer.rated._rated_first = not rated_first  # first_this_time() flips it
    assert worker.claimer.claim_free_slots() == 1
    running = Job.objects.get(status=JobStatus.RUNNING)
    stamped = slots_in_use("rated", Rate(1, 2), "default")
    if rated_first:
        assert (running.pk, stamped) == (limited.pk, 1)
        assert Job.objects.get(pk=alone.pk).status == JobStatus.READY
    else:
        assert (running.pk, stamped) == (alone.pk, 0), "no slot stamped for a start that must wait"
        assert Job.objects.get(pk=limited.pk).status == JobStatus.READY
    worker._threads.take_unstarted()


@pytest.mark.django_db(transaction=True)
def test_a_job_that_must_run_alone_is_claimed_by_itself_within_the_rate(settings):
    """Claimed with the others of its queue, they would wait at its gate, their slots stamped."""
    from django_dbjobs.models import Isolation
    from django_dbjobs.worker import Worker

    settings.DBJOBS_QUEUE_LIMITS = {"rated": {"rate": "10/s"}}
    alone = enqueue(jobs.rated_start, 0, priority=50)
    Job.objects.filter(pk=alone.pk).update(isolation=Isolation.WAITING)
    for n in range(1, 4):
        enqueue(jobs.rated_start, n)
    worker = Worker(concurrency=4)
    worker.claimer.rated._rated_first = False  # first_this_time() flips it: the rated queues first
    assert worker.claimer.claim_free_slots() == 1
    assert list(Job.objects.filter(status=JobStatus.RUNNING).values_list("pk", flat=True)) == [alone.pk]
    assert slots_in_use("rated", Rate(10, 1), "default") == 1
    worker._threads.take_unstarted()


@pytest.mark.django_db(transaction=True)
def test_a_rate_limited_job_that_must_run_alone_is_not_starved_by_a_worker_never_idle(settings):
    """Claimed only by a worker holding nothing; one that always holds something (a steady
    supply of other work) passes it over, then claims nothing until its jobs are done, and
    takes it first: a drain, once per such job."""
    from django_dbjobs.models import Isolation
    from django_dbjobs.worker import Worker

    settings.DBJOBS_QUEUE_LIMITS = {"rated": {"rate": "10/s"}}
    alone = enqueue(jobs.rated_start, 0)
    Job.objects.filter(pk=alone.pk).update(isolation=Isolation.WAITING)  # recovered from a dead worker
    for n in range(20):
        enqueue(jobs.add, n, n)  # other work, due all along
    worker = Worker(concurrency=2, prefetch=0)
    worker.claimer.rated._rated_first = True  # first_this_time() flips it: the other queues first
    held = []
    for _turn in range(12):
        worker.claimer.claim_free_slots()
        held += worker._threads.take_unstarted()  # held, as if running
        if Job.objects.filter(pk=alone.pk, status=JobStatus.RUNNING).exists():
            break
        worker.job_done(held.pop(0))  # one job ends each turn: the worker is never idle
    running = Job.objects.get(pk=alone.pk)
    assert running.status == JobStatus.RUNNING, "passed over for as long as the worker held anything"
    assert alone.pk in [job.pk for job in held] and slots_in_use("rated", Rate(10, 1), "default") == 1
