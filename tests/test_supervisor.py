"""run_jobs --processes N: real supervisor and worker processes, real signals."""

import os
import signal
import sys
import time

import pytest

from django_dbjobs import enqueue
from django_dbjobs.models import Job, JobStatus, WorkerProcess
from django_dbjobs.worker.lifecycle.stop_signals import forwarded
from django_dbjobs.worker.lifecycle.supervisor import Supervisor
from tests import jobs
from tests.conftest import stop_process, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def children():
    return set(WorkerProcess.objects.values_list("pid", flat=True))


def started(record_file, value):
    return lambda: f"started:{value}" in record_file.read_text().split()


def test_processes_share_the_work_each_a_worker_of_its_own(run_jobs, record_file):
    supervisor = run_jobs("--processes", "2", "--prefetch", "0", "-v", "1")
    assert wait_for(lambda: len(children()) == 2), supervisor.output()  # both ready before any job
    for n in range(6):
        enqueue(jobs.announce_sleep_record, 0.3, n)
    assert wait_for(lambda: Job.objects.filter(status=JobStatus.SUCCESSFUL).count() == 6, 60)
    assert len(set(Job.objects.values_list("worker", flat=True))) == 2, "both processes ran jobs"
    supervisor.process.send_signal(signal.SIGTERM)
    assert supervisor.wait(60) == 0, supervisor.output()
    output = supervisor.output()
    assert "Worker process started index=0" in output and "Worker process started index=1" in output
    assert "Supervisor stopped" in output and "exit_statuses=[0, 0]" in output


def test_burst_exits_when_every_process_is_done(run_jobs):
    for n in range(10):
        enqueue(jobs.add, n, n)
    supervisor = run_jobs("--processes", "2", "--burst")
    assert supervisor.wait(60) == 0, supervisor.output()
    assert Job.objects.filter(status=JobStatus.SUCCESSFUL).count() == 10


def test_an_abbreviated_option_or_a_nested_supervisor_is_refused(run_jobs):
    abbreviated = run_jobs("--proc", "2", "--burst")
    assert abbreviated.wait(30) != 0 and "unrecognized arguments: --proc" in abbreviated.output()
    nested = run_jobs("--processes", "2", "--burst", env={"DBJOBS_SUPERVISOR_PID": str(os.getpid())})
    assert nested.wait(30) == 1 and "cannot run under another" in nested.output()


def test_sigterm_lets_every_process_finish_its_jobs(run_jobs, record_file):
    job = enqueue(jobs.announce_sleep_record, 1.0, "a")
    supervisor = run_jobs("--processes", "2")
    assert wait_for(started(record_file, "a")), supervisor.output()
    assert wait_for(lambda: len(children()) == 2), supervisor.output()
    supervisor.process.send_signal(signal.SIGTERM)
    assert supervisor.wait(30) == 0, supervisor.output()
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCESSFUL and "a" in record_file.read_text().split()
    assert not WorkerProcess.objects.exists()  # every child stopped and removed its row


def test_a_second_signal_releases_the_jobs_and_exits_at_once(run_jobs, record_file):
    job = enqueue(jobs.announce_sleep_record, 60, "b")
    supervisor = run_jobs("--processes", "2")
    assert wait_for(started(record_file, "b")), supervisor.output()
    assert wait_for(lambda: len(children()) == 2), supervisor.output()
    supervisor.process.send_signal(signal.SIGINT)
    time.sleep(0.3)
    began = time.monotonic()
    supervisor.process.send_signal(signal.SIGINT)
    assert supervisor.wait(30) == 0, supervisor.output()
    assert time.monotonic() - began < 10
    job.refresh_from_db()
    assert (job.status, job.attempts) == (JobStatus.READY, 0)  # given back uncharged


def test_a_killed_process_is_replaced_and_its_jobs_recovered(run_jobs, record_file):
    job = enqueue(jobs.announce_sleep_record, 60, "c")
    supervisor = run_jobs("--processes", "2", env={"DBJOBS_TEST_RESTART_PAUSE": "0.2"})
    assert wait_for(started(record_file, "c")), supervisor.output()
    assert wait_for(lambda: len(children()) == 2), supervisor.output()
    victim = Job.objects.get(pk=job.pk).worker
    victim_pid = WorkerProcess.objects.get(pk=victim).pid
    before = children()
    os.kill(victim_pid, signal.SIGKILL)
    assert wait_for(lambda: len(children() - before) == 1, timeout=30), supervisor.output()
    assert "exit_status=-9 (SIGKILL)" in supervisor.output()
    # The dead child's job is recovered by the sweep and runs again (on the same or the new child).
    assert wait_for(lambda: record_file.read_text().split().count("started:c") == 2, timeout=30)
    supervisor.process.send_signal(signal.SIGTERM)
    supervisor.process.send_signal(signal.SIGTERM)
    assert supervisor.wait(30) == 0, supervisor.output()


def test_a_crash_loop_is_reported_with_growing_pauses(run_jobs):
    supervisor = run_jobs(
        "--processes", "2", env={"DBJOBS_TEST_CHILD_CRASH": "1", "DBJOBS_TEST_RESTART_PAUSE": "0.1"}
    )
    assert wait_for(lambda: "crash loop: 3 deaths in a row" in supervisor.output(), timeout=30), (
        supervisor.output()
    )
    output = supervisor.output()
    assert (
        "restarting in 0.1s" in output and "restarting in 0.2s" in output and "restarting in 0.4s" in output
    )
    supervisor.process.send_signal(signal.SIGTERM)
    # The stop is quick; its status is 0, or 1 when a child died of its own error again
    # after the signal (its crash, not the stop, ended it).
    assert supervisor.wait(30) in (0, 1), output
    assert "Supervisor stopped" in supervisor.output()


def test_a_crash_loop_under_burst_is_given_up(run_jobs):
    supervisor = run_jobs(
        "--processes",
        "2",
        "--burst",
        env={"DBJOBS_TEST_CHILD_CRASH": "1", "DBJOBS_TEST_RESTART_PAUSE": "0.05"},
    )
    assert supervisor.wait(60) == 1, supervisor.output()
    assert "giving up (--burst)" in supervisor.output()


def test_a_group_signal_counts_once(run_jobs, record_file):
    """systemd's KillMode=control-group signals every process: a child stops on its supervisor's word."""
    job = enqueue(jobs.announce_sleep_record, 1.5, "grace")
    supervisor = run_jobs("--processes", "2")
    assert wait_for(started(record_file, "grace")), supervisor.output()
    assert wait_for(lambda: len(children()) == 2), supervisor.output()
    pids = children()
    # The worst case, made certain: both signals pending in a child at once. Two ordinary
    # SIGTERMs pending together merge into one, with the first sender's pid.
    for pid in pids:
        stop_process(pid)
    for pid in pids:  # the group's signal reaches the children directly ...
        os.kill(pid, signal.SIGTERM)
    supervisor.process.send_signal(signal.SIGTERM)  # ... and the supervisor, which forwards it
    assert wait_for(lambda: all(forwarded(signal.SIGTERM) in pending(pid) for pid in pids), 10)
    for pid in pids:
        os.kill(pid, signal.SIGCONT)
    assert supervisor.wait(30) == 0, supervisor.output()
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCESSFUL, "the running job had its grace: one stop, not two"
    assert "Ignoring SIGTERM from pid" in supervisor.output()


def pending(pid: int) -> set[int]:
    """The signals pending for process `pid` (Linux's /proc)."""
    for line in open(f"/proc/{pid}/status").read().splitlines():
        if line.startswith("ShdPnd:"):
            mask = int(line.split()[1], 16)
            return {number for number in range(1, 65) if mask & (1 << (number - 1))}
    raise AssertionError(f"no ShdPnd line for pid {pid}")


def test_children_stop_when_the_supervisor_is_killed(run_jobs):
    supervisor = run_jobs("--processes", "2")
    assert wait_for(lambda: len(children()) == 2), supervisor.output()
    pids = children()
    supervisor.process.kill()
    supervisor.process.wait()

    def gone():
        alive = 0
        for pid in pids:
            try:
                os.kill(pid, 0)
                with open(f"/proc/{pid}/stat") as stat:
                    alive += stat.read().split()[2] != "Z"
            except (ProcessLookupError, FileNotFoundError):
                pass
        return alive == 0

    assert wait_for(gone, timeout=30), "the workers outlived their supervisor"  # they watch their parent
    assert wait_for(lambda: not WorkerProcess.objects.exists()), (
        "they stopped gracefully, removing their rows"
    )


def test_an_exit_callback_that_raises_is_logged_and_the_supervisor_goes_on(caplog):
    """on_exit (the metrics endpoint's) fails for every child: each is still reaped, none orphaned."""
    told = []

    def on_exit(pid):
        told.append(pid)
        raise RuntimeError("metrics directory gone")

    quick = [sys.executable, "-c", "pass"]
    chief = Supervisor(quick, 2, burst=True, on_exit=on_exit)
    assert chief.run() == 0
    assert sorted(told) == sorted(child.process.pid for child in chief.children)
    assert all(child.done and child.process.returncode == 0 for child in chief.children)
    failed = [r for r in caplog.records if r.getMessage().startswith("The exit callback failed")]
    assert len(failed) == 2 and all(r.exc_info and r.exc_info[0] is RuntimeError for r in failed)
