"""Batches and dependencies with real run_jobs processes: exactly-once callbacks, kill -9, order."""

import collections
import os
import signal
import time

import pytest

from django_dbjobs import batch, enqueue, enqueue_many
from django_dbjobs.models import Batch, Job, JobStatus, WorkerProcess
from tests import jobs
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def stuck(opened: Batch, worker) -> str:
    """What a batch that never finished left behind: its counters, its jobs' states, the
    callback job's, and the workers' output."""
    opened.refresh_from_db()
    jobs_of_batch = Job.objects.filter(batch=opened)
    states = collections.Counter(jobs_of_batch.values_list("status", "blocked"))
    callback = list(
        Job.objects.filter(pk=opened.on_complete).values(
            "status", "blocked", "waiting_for", "run_at", "worker", "attempts"
        )
    )
    running = list(jobs_of_batch.filter(status=JobStatus.RUNNING).values_list("worker", flat=True)[:5])
    for pid in live_workers():  # each prints its threads' stacks into the output (tests/settings.py)
        os.kill(pid, signal.SIGUSR2)
    time.sleep(1)
    return (
        f"batch total={opened.total} succeeded={opened.succeeded} failed={opened.failed} "
        f"finished_at={opened.finished_at}; jobs by (status, blocked)={dict(states)}; "
        f"callback={callback}; running under={running}; "
        f"workers={list(WorkerProcess.objects.values_list('id', 'pid', 'heartbeat_at'))}\n{worker.output()}"
    )


def live_workers() -> list[int]:
    """The pids of worker processes that are running (not killed, not zombies)."""
    pids = []
    for pid in sorted(WorkerProcess.objects.values_list("pid", flat=True)):
        try:
            with open(f"/proc/{pid}/status") as status:
                if "zombie" not in status.read():
                    pids.append(pid)
        except (FileNotFoundError, ProcessLookupError):
            pass  # gone between the listing and the read (the kernel says ESRCH on read)
    return pids


def callbacks(record_file):
    return [line for line in record_file.read_text().split() if line.startswith("complete:")]


@pytest.mark.slow
def test_four_processes_finishing_a_batch_together_run_its_callback_once_twenty_times(run_jobs, record_file):
    batches = 20
    for n in range(batches):
        with batch(description=f"b{n}", on_complete=jobs.batch_completed):
            enqueue_many(jobs.noop, [(i,) for i in range(2000)])
    worker = run_jobs("--processes", "4", "--concurrency", "4")
    assert wait_for(lambda: len(callbacks(record_file)) >= batches, 300), worker.output()
    assert wait_for(lambda: not Job.objects.exclude(status=JobStatus.SUCCESSFUL).exists(), 30)
    time.sleep(1)  # a second callback, were there one, would have run by now
    worker.signal()
    assert worker.wait() == 0, worker.output()
    counted = collections.Counter(callbacks(record_file))
    assert counted == {f"complete:b{n}:2000:2000:0": 1 for n in range(batches)}, counted
    # Several processes finished jobs of the batches (all 4, unless one started late on a busy machine).
    assert len(set(Job.objects.filter(batch__isnull=False).values_list("worker", flat=True))) >= 2
    assert Batch.objects.filter(finished_at__isnull=True).count() == 0


@pytest.mark.slow
def test_kill_9_storms_during_a_batch_still_give_one_callback(run_jobs, record_file):
    count = 3000  # 30 s of work for 4 threads: the kills land while the batch runs
    with batch(description="storm", on_complete=jobs.batch_completed) as opened:
        enqueue_many(jobs.pause, [(0.01,) for _ in range(count)])
    worker = run_jobs("--processes", "2", "--concurrency", "2", env={"DBJOBS_TEST_RESTART_PAUSE": "0.2"})
    kills = 0
    while kills < 4:
        assert wait_for(lambda: len(live_workers()) == 2, 30), worker.output()
        time.sleep(0.5)
        alive = live_workers()  # a worker the sweep took for dead re-registers: look again
        if alive:
            os.kill(alive[kills % len(alive)], signal.SIGKILL)  # its jobs stay its own until a sweep
            kills += 1
    opened.refresh_from_db()
    assert opened.finished_at is None, "the storm came after the batch: make it longer"
    assert wait_for(lambda: len(callbacks(record_file)) >= 1, 180), stuck(opened, worker)
    time.sleep(2)  # a second callback, were there one, would have run by now
    worker.signal()
    assert worker.wait() == 0, worker.output()
    opened.refresh_from_db()
    assert opened.succeeded + opened.failed == count and opened.finished_at is not None
    assert callbacks(record_file) == [f"complete:storm:{count}:{opened.succeeded}:{opened.failed}"]
    statuses = collections.Counter(Job.objects.filter(batch=opened).values_list("status", flat=True))
    expected = collections.Counter({JobStatus.SUCCESSFUL: opened.succeeded, JobStatus.FAILED: opened.failed})
    assert statuses == +expected
    assert "exit_status=-9" in worker.output(), "the workers were killed"


def test_a_chain_runs_in_order_across_threads_and_a_dead_letter_cancels_the_rest(run_jobs, record_file):
    a = enqueue(jobs.record, "a")
    b = enqueue(jobs.sleep_then_record, 0.2, "b", after=[a])
    enqueue(jobs.record, "c", after=[b])
    failing = enqueue(jobs.always_fails, max_attempts=1)
    d = enqueue(jobs.record, "d", after=[failing])
    e = enqueue(jobs.record, "e", after=[d])
    worker = run_jobs("--concurrency", "4")
    assert wait_for(lambda: "c" in record_file.read_text().split(), 30), worker.output()
    assert wait_for(lambda: Job.objects.filter(pk=e.pk, status=JobStatus.FAILED).exists(), 30)
    worker.signal()
    assert worker.wait() == 0, worker.output()
    assert record_file.read_text().split() == ["a", "b", "c"]
    for cancelled in (d, e):
        cancelled.refresh_from_db()
        assert cancelled.attempts == 0 and "DependencyFailed" in cancelled.last_error
