"""Schedulers in real run_jobs processes: exactly one job per due time, through kill -9 and restarts."""

import datetime
import json
import signal
import threading
import time

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from django_dbjobs.models import Job, Schedule, ScheduleTick
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def stop(workers) -> None:
    for worker in workers:
        worker.signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait() == 0, worker.output()


def test_three_schedulers_fire_each_second_exactly_once_through_kill_9(run_jobs):
    Schedule.objects.create(name="every-second", cron="* * * * * *", job="tests.jobs.tick")
    workers = [run_jobs("--concurrency", "2") for _ in range(3)]
    assert wait_for(lambda: Job.objects.exists(), 20), workers[0].output()
    time.sleep(8)
    workers[0].process.kill()  # SIGKILL: whatever it was doing, mid-transaction included
    workers.append(run_jobs("--concurrency", "2"))
    time.sleep(8)
    workers[1].process.kill()
    workers[2].process.kill()
    workers.append(run_jobs("--concurrency", "2"))
    time.sleep(14)
    stop(workers[3:])
    due_times = list(Job.objects.order_by("scheduled_for").values_list("scheduled_for", flat=True))
    assert len(due_times) == len(set(due_times)), "a due time was fired twice"
    span = int((due_times[-1] - due_times[0]).total_seconds())
    missing = [
        due_times[0] + datetime.timedelta(seconds=s)
        for s in range(span + 1)
        if due_times[0] + datetime.timedelta(seconds=s) not in set(due_times)
    ]
    assert not missing, f"due times never fired: {missing}"
    assert span >= 25, f"only {span + 1} seconds were scheduled"
    ticks = set(ScheduleTick.objects.values_list("due_at", "job_id"))
    assert ticks == set(Job.objects.values_list("scheduled_for", "pk")), "one tick per job"


def test_a_worker_with_no_scheduler_never_fires(run_jobs):
    Schedule.objects.create(name="every-second", cron="* * * * * *", job="tests.jobs.tick")
    worker = run_jobs("--no-scheduler")
    assert wait_for(lambda: "Worker started" in worker.output(), 20)
    time.sleep(2.5)
    stop([worker])
    assert not Job.objects.exists()
    assert "scheduler=off" in worker.output()


def test_a_worker_syncs_settings_schedules_at_start_and_fires_them(run_jobs):
    schedules = {"ping": {"job": "tests.jobs.tick", "cron": "* * * * * *", "queue": "pings"}}
    worker = run_jobs(env={"DBJOBS_TEST_SCHEDULES": json.dumps(schedules)})
    assert wait_for(lambda: Job.objects.filter(queue="pings", status="SUCCESSFUL").count() >= 2, 20), (
        worker.output()
    )
    stop([worker])
    schedule = Schedule.objects.get()
    assert (schedule.name, schedule.defined_in, schedule.queue) == ("ping", "settings", "pings")
    assert "Schedule created from DBJOBS_SCHEDULES name=ping" in worker.output()


def test_a_worker_refuses_to_start_with_invalid_settings_schedules(run_jobs):
    schedules = {"broken": {"job": "tests.jobs.tick", "cron": "61 * * * *"}}
    worker = run_jobs(env={"DBJOBS_TEST_SCHEDULES": json.dumps(schedules)})
    assert worker.wait() != 0
    assert "DBJOBS_SCHEDULES['broken']['cron']" in worker.output() and "dbjobs.E017" in worker.output()
    assert "The minute field of the cron expression '61 * * * *' is 61; minutes run from 0 to 59." in (
        worker.output()
    )
    assert not Schedule.objects.exists()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="NOTIFY exists on PostgreSQL only")
def test_a_schedule_saved_in_another_process_wakes_the_scheduler_at_once_on_postgresql(run_jobs):
    worker = run_jobs(env={"DBJOBS_TEST_SCHEDULE_CHECK_INTERVAL": "120"})
    assert wait_for(lambda: "Worker started" in worker.output(), 20)
    time.sleep(1)  # past the worker's first read of the (empty) schedule table
    Schedule.objects.create(name="every-second", cron="* * * * * *", job="tests.jobs.tick")
    assert wait_for(lambda: Job.objects.exists(), 5), "the scheduler did not wake for the new schedule"
    stop([worker])


def blocked_on_a_job_insert() -> bool:
    """True once another session of this test database has waited a second for a row lock inserting a job.

    Only this database's: another test session on the same server has job inserts of its own.
    """
    sql = {
        "postgresql": "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND datname = current_database() AND query ILIKE 'INSERT INTO %%django_dbjobs_job%%'",
        "mysql": "SELECT count(*) FROM information_schema.processlist WHERE command = 'Query' "
        "AND db = DATABASE() AND info LIKE 'INSERT %%django_dbjobs_job%%' AND time >= 1",
    }[connection.vendor]
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()[0] > 0


@pytest.mark.skipif(
    connection.vendor == "sqlite", reason="SQLite's one write lock would stop the scheduler before its BEGIN"
)
def test_a_scheduler_killed_inside_its_firing_transaction_loses_and_duplicates_nothing(run_jobs):
    schedule = Schedule.objects.create(
        name="every-second", cron="* * * * * *", job="tests.jobs.tick", no_overlap=True, missed_runs="all"
    )
    due = schedule.cron_schedule().next_after(timezone.now() + datetime.timedelta(seconds=2))
    Schedule.objects.filter(pk=schedule.pk).update(next_due_at=due)
    # Another session inserts a job holding the schedule's no_overlap key, uncommitted:
    # the scheduler that fires `due` moves the schedule on and writes the tick, then
    # waits on that key at its job's INSERT, mid-transaction.
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                key = "dbjobs-schedule:every-second"
                Job.objects.create(name="tests.jobs.tick", unique_key=key, active_key=key)
                holding.set()
                release.wait(60)
                transaction.set_rollback(True)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(10)
        killed = run_jobs()
        assert wait_for(blocked_on_a_job_insert, 30), killed.output()
        killed.process.kill()  # SIGKILL, after the schedule's UPDATE and the tick's INSERT
        killed.process.wait()
    finally:
        release.set()
        holder.join(30)
    # The server rolls the killed transaction back: the due time is still due, no tick.
    assert wait_for(lambda: Schedule.objects.get().next_due_at == due, 30)
    assert wait_for(lambda: not ScheduleTick.objects.exists(), 30)
    assert not Job.objects.exists()
    second = run_jobs()
    assert wait_for(lambda: ScheduleTick.objects.filter(due_at__gt=due).count() >= 2, 30), second.output()
    stop([second])
    ticks = sorted(ScheduleTick.objects.values_list("due_at", flat=True))
    assert ticks[0] == due, "the due time of the killed firing was fired again"
    assert ticks == [due + datetime.timedelta(seconds=s) for s in range(len(ticks))], ticks
    assert Job.objects.filter(scheduled_for=due).count() == 1
