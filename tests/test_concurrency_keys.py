"""Concurrency limits per key (flow/keys.py, flow/admission.py): enqueue, admission, and real workers."""

import collections
import signal
import threading
import time

import pytest
from django.db import connection, connections

from django_dbjobs import enqueue, enqueue_many, prepare
from django_dbjobs.exceptions import InvalidJob
from django_dbjobs.flow import admission
from django_dbjobs.models import Blocked, FailedJob, Job, JobStatus, WorkerProcess
from django_dbjobs.testing import run_jobs as run_jobs_here
from django_dbjobs.worker.claiming.admitter import Admitter
from tests import jobs
from tests.conftest import wait_for


def ledger(path):
    """{key: [(start, end)]} from keyed_span's lines, and the unkeyed starts."""
    starts, spans, plain = {}, collections.defaultdict(list), []
    for line in path.read_text().splitlines():
        kind, key, n, at = line.split()[:4]
        if key == "-":
            plain.append(float(at))
        elif kind == "start":
            starts[key, n] = float(at)
        else:
            spans[key].append((starts.pop((key, n)), float(at)))
    return spans, plain


def ran_twice(path) -> list:
    """The jobs that started more than once, with what their rows say (who ran them, why)."""
    starts = collections.Counter(
        int(line.split()[2]) for line in path.read_text().splitlines() if line.startswith("start k")
    )
    twice = {n for n, count in starts.items() if count > 1}
    rows = Job.objects.filter(name="tests.jobs.keyed_span").values_list(
        "args", "attempts", "pickups", "worker_ids", "errors"
    )
    return [row for row in rows if row[0][1] in twice]


def most_at_once(spans):
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = top = 0
    for _, change in events:  # an end sorts before a start at the same instant
        running += change
        top = max(top, running)
    return top


@pytest.mark.django_db
def test_a_template_key_is_formatted_with_the_arguments_and_the_job_waits_for_a_slot():
    job = enqueue(jobs.keyed_span, "a1", 7)
    job.refresh_from_db()
    assert (job.concurrency_key, job.concurrency_limit, job.blocked) == ("acct:a1", 2, Blocked.CONCURRENCY)
    by_name = enqueue(jobs.keyed_span, kwargs={"account": "b2", "n": 1})
    assert by_name.concurrency_key == "acct:b2"


@pytest.mark.django_db
def test_a_key_function_and_an_enqueue_override():
    assert enqueue(jobs.keyed_by_function, 5).concurrency_key == "tenant-5"
    assert enqueue(jobs.keyed_by_function, 5).concurrency_limit == 1  # the default limit
    job = enqueue(jobs.keyed_span, "a1", 1, concurrency_key="override", concurrency_limit=4)
    assert (job.concurrency_key, job.concurrency_limit) == ("override", 4)
    plain = enqueue(jobs.add, 1, 2, concurrency_key="adhoc")
    assert (plain.concurrency_key, plain.concurrency_limit) == ("adhoc", 1)
    assert plain.blocked == Blocked.CONCURRENCY
    assert enqueue(jobs.add, 1, 2).blocked == Blocked.NONE


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency_key": ""}, "concurrency_key must be a string of 1 to 200"),
        ({"concurrency_key": "x" * 201}, "concurrency_key must be a string of 1 to 200"),
        ({"concurrency_key": 5}, "concurrency_key must be a string"),
        ({"concurrency_key": "k", "concurrency_limit": 0}, "concurrency_limit must be an integer from 1"),
        ({"concurrency_key": "k", "concurrency_limit": True}, "concurrency_limit must be an integer"),
        ({"concurrency_limit": 2}, "concurrency_limit needs a concurrency_key"),
    ],
)
def test_bad_keys_and_limits_are_refused_and_nothing_is_written(options, message):
    with pytest.raises(InvalidJob, match=message):
        enqueue(jobs.add, 1, 2, **options)
    assert not Job.objects.exists()


@pytest.mark.django_db
@pytest.mark.filterwarnings("ignore::django_dbjobs.exceptions.UnimportedJobWarning")
def test_a_template_that_does_not_fit_the_arguments_is_refused():
    from django_dbjobs import job as job_decorator

    @job_decorator(name="tests.keyed_missing", concurrency_key="x:{1}")
    def keyed_missing(a):
        return a

    with pytest.raises(InvalidJob, match=r"template 'x:\{1\}' does not fit"):
        enqueue(keyed_missing, 1)
    assert not Job.objects.exists()


def test_a_bad_key_option_is_refused_at_registration():
    from django_dbjobs import job as job_decorator

    with pytest.raises(InvalidJob, match="concurrency_key must be"):
        job_decorator(name="tests.bad_key", concurrency_key=3)(lambda: None)
    with pytest.raises(InvalidJob, match="concurrency_limit needs a concurrency_key"):
        job_decorator(name="tests.bad_limit", concurrency_limit=3)(lambda: None)


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("sync:{acount_id}", r"names 'acount_id', which is not a parameter .*Did you mean \{account_id\}"),
        ("sync:{tenant}", r"names 'tenant', which is not a parameter"),
        ("sync:{account_id", r"template 'sync:\{account_id' is malformed"),
    ],
)
def test_a_template_naming_no_parameter_is_refused_at_registration(template, message):
    from django_dbjobs import job as job_decorator

    def sync_account(account_id, full=False):
        pass

    with pytest.raises(InvalidJob, match=message):
        job_decorator(name="tests.misspelled_key", concurrency_key=template)(sync_account)
    for fits in ("sync:{account_id}", "sync:{account_id.real}:{full!r}", "sync:{0}"):
        job_decorator(name="tests.fitting_key", concurrency_key=fits)(sync_account)


@pytest.mark.django_db
def test_enqueue_many_and_prepare_give_each_job_its_own_key():
    many = enqueue_many(jobs.keyed_span, [("a", 1), ("b", 2)])
    assert [j.concurrency_key for j in many] == ["acct:a", "acct:b"]
    assert prepare(jobs.keyed_span, "c", 3).concurrency_key == "acct:c"
    assert set(Job.objects.values_list("blocked", flat=True)) == {Blocked.CONCURRENCY}


@pytest.mark.django_db(transaction=True)
def test_the_admission_gives_a_key_its_limit_and_the_claim_skips_waiting_jobs():
    keyed = [enqueue(jobs.keyed_span, "a", n) for n in range(5)]
    plain = enqueue(jobs.add, 1, 1)
    # Waiting jobs are not claimable: only the unkeyed one, behind them in claim order.
    claimed = Job.objects.claim("w1", limit=10)
    assert [j.pk for j in claimed] == [plain.pk]
    assert admission.admit("default") == 2
    assert admission.admit("default") == 0  # the key is at its limit
    claimed = Job.objects.claim("w1", limit=10)
    assert sorted(j.pk for j in claimed) == sorted(j.pk for j in keyed[:2])  # in claim order
    assert admission.admit("default") == 0  # running jobs hold the slots
    claimed[0].mark_succeeded("w1", 0)
    assert Job.objects.get(pk=claimed[0].pk).blocked == Blocked.DONE  # finished: holds no slot
    assert admission.admit("default") == 1
    assert Job.objects.filter(blocked=Blocked.NONE, status=JobStatus.READY).get().pk == keyed[2].pk


@pytest.mark.django_db(transaction=True)
def test_a_retry_a_release_and_a_dead_letter_retry_give_the_slot_back():
    first, second = enqueue(jobs.keyed_span, "a", 1), enqueue(jobs.keyed_span, "a", 2)
    enqueue(jobs.keyed_span, "a", 3)
    admission.admit("default")
    job_a, job_b = Job.objects.claim("w1", limit=2)
    assert job_a.mark_for_retry("w1", {"summary": "x"}, delay=3600)  # waits an hour: holds no slot
    assert Job.objects.get(pk=job_a.pk).blocked == Blocked.CONCURRENCY
    assert Job.objects.release_all("w1", [job_b]) == 1
    assert Job.objects.get(pk=job_b.pk).blocked == Blocked.CONCURRENCY
    assert admission.admit("default") == 2  # job_b and the third: job_a is not due
    Job.objects.filter(pk=first.pk).update(status=JobStatus.FAILED, blocked=Blocked.NONE)
    FailedJob.objects.filter(pk=first.pk).retry_all()
    assert Job.objects.get(pk=first.pk).blocked == Blocked.CONCURRENCY
    assert second.pk in {job_a.pk, job_b.pk}


@pytest.mark.django_db(transaction=True)
def test_testing_run_jobs_runs_keyed_jobs(record_file):
    for n in range(3):
        enqueue(jobs.keyed_span, "a", n, 0)
    assert [j.status for j in run_jobs_here()] == [JobStatus.SUCCESSFUL] * 3


@pytest.mark.django_db(transaction=True)
def test_admissions_racing_on_their_own_connections_never_exceed_the_limit():
    for n in range(40):
        enqueue(jobs.keyed_span, "race", n)
    Job.objects.update(concurrency_limit=3)
    barrier, admitted, errors = threading.Barrier(4), [], []

    def admit():
        try:
            barrier.wait()
            for _ in range(5):
                admitted.append(admission.admit_key("acct:race", "default"))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=admit) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sum(admitted) == 3
    assert Job.objects.filter(blocked=Blocked.NONE).count() == 3


@pytest.mark.django_db(transaction=True)
def test_three_workers_never_run_more_than_the_limit_of_a_key(run_jobs, record_file):
    for n in range(200):
        enqueue(jobs.keyed_span, f"k{n % 5}", n, 0.05)
    for n in range(20):
        enqueue(jobs.unkeyed_span, n)
    workers = [run_jobs("--concurrency", "4") for _ in range(3)]
    finished = wait_for(lambda: not Job.objects.exclude(status=JobStatus.SUCCESSFUL).exists(), timeout=120)
    for worker in workers:
        worker.signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait() == 0, worker.output()
    assert finished, Job.objects.exclude(status=JobStatus.SUCCESSFUL).values_list("status", "blocked")[:10]
    spans, plain = ledger(record_file)
    assert sorted(spans) == [f"k{n}" for n in range(5)]
    assert sum(len(s) for s in spans.values()) == 200, ran_twice(record_file)  # every job ran, once
    assert max(most_at_once(s) for s in spans.values()) == 2  # the limit, reached and never passed
    assert len(plain) == 20
    keyed_starts = sorted(start for s in spans.values() for start, _ in s)
    # Enqueued after the 200 keyed jobs (which take at least 200 * 0.05 / 10 = 1 s), the
    # unkeyed ones are not held up behind them: all start before a quarter of them have.
    assert max(plain) < keyed_starts[len(keyed_starts) // 4], (max(plain), keyed_starts[0], keyed_starts[-1])


@pytest.mark.django_db(transaction=True)
def test_a_killed_worker_gives_its_slots_back_within_the_lease_bound(run_jobs, record_file, settings):
    for n in range(2):
        enqueue(jobs.keyed_hold_first_attempt, "a", n)
    for n in range(2, 4):
        enqueue(jobs.keyed_hold_first_attempt, "a", n, 0)
    holder = run_jobs("--concurrency", "4")
    assert wait_for(lambda: Job.objects.filter(status=JobStatus.RUNNING).count() == 2, timeout=20)
    other = run_jobs("--concurrency", "4")  # started first: the bound is the sweep's, not a start-up's
    assert wait_for(lambda: WorkerProcess.objects.count() == 2, timeout=20)
    time.sleep(0.5)  # neither would start a third job of the key
    assert Job.objects.filter(status=JobStatus.RUNNING).count() == 2
    holder.process.send_signal(signal.SIGKILL)
    holder.wait()
    killed_at = time.time()
    done = wait_for(lambda: not Job.objects.exclude(status=JobStatus.SUCCESSFUL).exists(), timeout=30)
    states = list(Job.objects.values_list("status", "blocked", "isolation", "attempts", "worker"))
    assert done, (states, record_file.read_text())
    other.signal(signal.SIGTERM)
    assert other.wait() == 0, other.output()
    starts = [float(line.split()[3]) for line in record_file.read_text().splitlines()]
    later = [at for at in starts if at > killed_at]
    bound = settings.DBJOBS_HEARTBEAT_TIMEOUT + settings.DBJOBS_SWEEP_INTERVAL + Admitter.LOOK_INTERVAL
    # Started again within the lease bound (and a second for a loaded machine).
    assert later and min(later) - killed_at < bound + 1.0, (min(later) - killed_at, bound)
    assert Job.objects.filter(status=JobStatus.SUCCESSFUL).count() == 4


@pytest.mark.django_db(transaction=True)
def test_retention_deletes_the_lock_rows_of_keys_no_job_uses():
    from django_dbjobs.models import ConcurrencyKey
    from django_dbjobs.operations.retention import Pruner

    done, active = enqueue(jobs.keyed_span, "done", 1), enqueue(jobs.keyed_span, "active", 1)
    admission.admit("default")
    assert set(ConcurrencyKey.objects.values_list("key", flat=True)) == {"acct:done", "acct:active"}
    Job.objects.filter(pk=done.pk).update(status=JobStatus.SUCCESSFUL)
    Pruner("default").prune_if_due()
    assert list(ConcurrencyKey.objects.values_list("key", flat=True)) == ["acct:active"]
    enqueue(jobs.keyed_span, "done", 2)  # the key comes back: its row too
    assert admission.admit("default") == 1
    assert Job.objects.filter(pk=active.pk, blocked=Blocked.NONE).exists()


@pytest.mark.django_db(transaction=True)
def test_a_frozen_worker_that_lost_its_keyed_job_stops_it_when_it_thaws(run_jobs, record_file, settings):
    """Its slot went back to the key while it was frozen: running on would make two at once."""
    from tests.conftest import freeze

    first = enqueue(jobs.keyed_python_span, "a", 1, 30)
    frozen = run_jobs()
    assert wait_for(lambda: "start a 1 " in record_file.read_text(), timeout=20)
    freeze(frozen)
    other = run_jobs()  # its sweep gives the job back; it runs the job itself (the key's one slot)
    assert wait_for(lambda: record_file.read_text().count("start a 1 ") == 2, timeout=30)
    frozen.process.send_signal(signal.SIGCONT)  # its row is gone: signal() would wait for it
    thawed_at = time.time()
    # The thawed worker learns it lost the job (its next heartbeat) and interrupts it.
    assert wait_for(lambda: "Job interrupted: this worker lost it" in frozen.output(), timeout=10)
    time.sleep(0.5)
    lines = record_file.read_text().split("\n")
    ends = [float(line.split()[3]) for line in lines if line.startswith("end a 1 ")]
    assert ends == [], lines  # neither run got to its end: one was interrupted, one runs on
    assert time.time() - thawed_at < 10
    Job.objects.filter(pk=first.pk).cancel()
    for worker in (frozen, other):
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0, worker.output()


@pytest.mark.django_db
def test_a_lone_surrogate_in_a_key_is_refused_and_a_hand_built_keyed_job_still_waits():
    from django_dbjobs import bulk_enqueue

    with pytest.raises(InvalidJob, match="lone surrogate"):
        enqueue(jobs.add, 1, 2, concurrency_key="bad \udcff")
    assert not Job.objects.exists()
    (built,) = bulk_enqueue([Job(name=jobs.add.name, args=[1, 2], concurrency_key="by-hand")])
    built.refresh_from_db()
    assert (built.blocked, built.concurrency_limit) == (Blocked.CONCURRENCY, 1)


@pytest.mark.django_db(transaction=True)
def test_a_job_admitted_before_its_queue_was_paused_gives_its_slot_back():
    from django_dbjobs.db.outage import Outage
    from django_dbjobs.flow.admission import Scope

    job = enqueue(jobs.keyed_span, "a", 1, queue="slow")
    assert admission.admit("default") == 1
    later = enqueue(jobs.keyed_span, "a", 2)  # the key's one other slot
    enqueue(jobs.keyed_span, "a", 3)
    admitter = Admitter("default", Outage("default"), lambda: Scope(None, frozenset({"slow"})))
    assert admitter.admit_if_due() == 2  # "slow" is paused: its job waits again, and two others go
    assert Job.objects.get(pk=job.pk).blocked == Blocked.CONCURRENCY
    assert Job.objects.get(pk=later.pk).blocked == Blocked.NONE


@pytest.mark.django_db(transaction=True)
def test_keys_that_differ_only_in_case_are_admitted_on_every_database():
    enqueue(jobs.add, 1, 1, concurrency_key="Sync:1")
    enqueue(jobs.add, 1, 2, concurrency_key="sync:1")
    admitted = admission.admit("default")
    # MySQL's default collation makes them one key (one slot); elsewhere they are two.
    assert admitted == (1 if connection.vendor == "mysql" else 2)


@pytest.mark.django_db(transaction=True)
def test_a_stopping_worker_interrupts_the_keyed_jobs_it_gives_back(record_file):
    from django_dbjobs.worker import Worker

    job = enqueue(jobs.keyed_python_span, "a", 1, 4)
    worker = Worker(concurrency=1, shutdown_grace=0.2, poll_interval=0.1)
    thread = threading.Thread(target=worker.run)
    thread.start()
    assert wait_for(lambda: "start a 1 " in record_file.read_text(), timeout=20)
    worker.stop()
    thread.join(20)
    assert Job.objects.get(pk=job.pk).blocked == Blocked.CONCURRENCY  # given back: its slot is free
    time.sleep(4.5)  # past the end of its run, had it gone on
    assert "end a 1 " not in record_file.read_text()
