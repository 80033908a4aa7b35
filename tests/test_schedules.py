"""Schedules in the database: validation, settings sync, firing exactly once (scheduler.py, schedules.py)."""

import datetime
import json
import logging
import threading
import time

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import IntegrityError, connection, connections, transaction
from django.db.models.functions import Now
from django.test import override_settings
from django.utils import timezone

from django_dbjobs import checks, db
from django_dbjobs.enqueuing import wakeup
from django_dbjobs.exceptions import InvalidSchedule
from django_dbjobs.models import DefinedIn, Job, Schedule, ScheduleTick
from django_dbjobs.schedules.definitions import sync_settings
from django_dbjobs.schedules.firing import fire, run_now
from django_dbjobs.schedules.scheduler import Scheduler
from django_dbjobs.signals import schedule_fired
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def make(name="report", **fields) -> Schedule:
    values = {"cron": "0 3 * * *", "job": "tests.jobs.add", "args": [1, 2]}
    values.update(fields)
    schedule = Schedule(name=name, **values)
    schedule.full_clean()
    schedule.save()
    return schedule


def db_second() -> int:
    """The seconds of the database clock's current minute."""
    now = db.database_now()
    return (datetime.datetime.fromisoformat(now) if isinstance(now, str) else now).second


def clear_of_minute_edges() -> None:
    """Wait until the database clock is 7 to 53 seconds into a minute.

    Tests of per-minute schedules assume that no minute starts while they run, and that
    the latest one started more than missed_runs.ON_TIME ago.
    """
    while not 7 <= db_second() <= 53:
        time.sleep(0.5)


def due_ago(schedule: Schedule, seconds: float = 0) -> datetime.datetime:
    """Set `schedule` on its latest due time at least `seconds` old by the database clock, unfired."""
    now = Schedule.objects.annotate(db_now=Now()).values_list("db_now", flat=True).get(pk=schedule.pk)
    limit = now - datetime.timedelta(seconds=seconds)
    cron, span = schedule.cron_schedule(), datetime.timedelta(seconds=1)
    while (due := cron.next_after(limit - span)) > limit:
        span *= 2
    while (later := cron.next_after(due)) <= limit:
        due = later
    Schedule.objects.filter(pk=schedule.pk).update(next_due_at=due)
    schedule.refresh_from_db()
    return due


def test_a_new_schedule_is_next_due_at_its_next_due_time():
    schedule = make(cron="30 2 * * *", timezone="Europe/Paris")
    now = timezone.now()
    assert now < schedule.next_due_at <= now + datetime.timedelta(days=1)
    local = schedule.next_due_at.astimezone(schedule.cron_schedule()._tz)
    assert (local.hour, local.minute, local.second) == (2, 30, 0)
    assert schedule.defined_in == DefinedIn.DATABASE and schedule.enabled


@pytest.mark.parametrize(
    "fields, field, message",
    [
        ({"cron": "61 * * * *"}, "cron", "minute field .* is 61; minutes run from 0 to 59"),
        ({"cron": "0 0 31 2 *"}, "cron", "0 0 31 2 \\*' never matches: February has no day 31"),
        ({"timezone": "Mars/Olympus_Mons"}, "timezone", "Unknown timezone"),
        ({"job": "os.system"}, "job", "not a registered job"),
        ({"args": [float("nan")]}, "args", "JSON cannot represent"),
        ({"args": [1]}, "args", "do not fit"),
        ({"kwargs": {"c": 3}}, "args", "do not fit"),
        ({"queue": "no spaces allowed"}, "queue", "queue must be"),
        ({"priority": 500}, "priority", "between -100 and 100"),
        ({"max_attempts": 0}, "max_attempts", "positive integer"),
        ({"missed_runs": "sometimes"}, "missed_runs", "missed_runs must be one of"),
        ({"due_time_argument": "not a name"}, "due_time_argument", "argument name"),
        ({"due_time_argument": "due"}, "args", "do not fit"),  # add(a, b) takes no `due`
    ],
)
def test_an_invalid_schedule_is_refused_with_a_clear_message_and_nothing_saved(fields, field, message):
    with pytest.raises(ValidationError) as caught:
        make(**fields)
    assert field in caught.value.message_dict, caught.value.message_dict
    assert any(__import__("re").search(message, m) for m in caught.value.message_dict[field])
    assert not Schedule.objects.exists()


def test_save_without_full_clean_still_refuses_a_bad_cron_expression():
    with pytest.raises(InvalidSchedule, match="has 3 fields"):
        Schedule.objects.create(name="bad", cron="* * *", job="tests.jobs.tick")
    assert not Schedule.objects.exists()


def test_firing_a_due_schedule_enqueues_one_job_for_its_due_time():
    clear_of_minute_edges()
    schedule = make(cron="* * * * *")
    due = due_ago(schedule)
    scheduler = Scheduler("tests:1")
    scheduler.fire_due()
    job = Job.objects.get()
    assert (job.name, job.args, job.scheduled_for) == ("tests.jobs.add", [1, 2], due)
    schedule.refresh_from_db()
    assert schedule.last_due_at == due and schedule.last_job_id == job.pk and schedule.next_due_at > due
    tick = ScheduleTick.objects.get()
    assert (tick.schedule_id, tick.due_at, tick.job_id) == (schedule.pk, due, job.pk)
    assert tick.fired_by == "tests:1"
    scheduler.fire_due()  # nothing more is due
    assert Job.objects.count() == 1


def test_two_schedulers_racing_on_the_same_due_time_enqueue_one_job():
    """Each round, two threads with their own connections fire the same read of a schedule at once."""
    rounds = 15
    barrier = threading.Barrier(2)
    errors, expected = [], []

    def race(snapshot, now):
        try:
            barrier.wait(10)
            fire(snapshot, now, f"tests:{threading.get_ident()}", "default")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    for number in range(rounds):
        schedule = make(f"race-{number}", cron="* * * * * *")
        due_ago(schedule)
        snapshot = Schedule.objects.annotate(db_now=Now()).get(pk=schedule.pk)
        seconds = int((snapshot.db_now - snapshot.next_due_at).total_seconds())
        first = snapshot.next_due_at
        expected += [(schedule.pk, first + datetime.timedelta(seconds=s)) for s in range(seconds + 1)]
        threads = [threading.Thread(target=race, args=(snapshot, snapshot.db_now)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    assert not errors, errors
    ticks = ScheduleTick.objects.values_list("schedule_id", "due_at", "job_id")
    assert sorted((schedule, due) for schedule, due, _ in ticks) == sorted(expected), "one tick per due time"
    jobs = Job.objects.values_list("pk", "scheduled_for")
    assert sorted(jobs) == sorted((job, due) for _, due, job in ticks), "one job per tick, none other"


def test_the_unique_tick_refuses_a_due_time_fired_twice_even_past_the_fence():
    clear_of_minute_edges()
    schedule = make(cron="* * * * *")
    due = due_ago(schedule)
    Scheduler("tests:1").fire_due()
    # A stale save (or a hand-edited row) puts the schedule back on a due time already fired.
    Schedule.objects.filter(pk=schedule.pk).update(next_due_at=due)
    Scheduler("tests:2").fire_due()
    assert Job.objects.filter(scheduled_for=due).count() == 1
    schedule.refresh_from_db()
    assert schedule.next_due_at > due, "the schedule moved on past the due time already fired"
    with pytest.raises(IntegrityError), transaction.atomic():
        ScheduleTick.objects.create(schedule=schedule, due_at=due)


@pytest.mark.parametrize("policy", ["latest", "skip", "all"])
def test_missed_runs_after_an_hour_of_downtime_follow_the_policy(policy):
    clear_of_minute_edges()
    schedule = make(cron="* * * * *", missed_runs=policy)
    first = due_ago(schedule, 3600)
    Scheduler("tests:1").fire_due()
    schedule.refresh_from_db()
    assert schedule.next_due_at > timezone.now() - datetime.timedelta(seconds=5), "moved on past now"
    minutes = int((schedule.next_due_at - first).total_seconds() // 60)
    assert minutes >= 61
    every = [first + datetime.timedelta(minutes=m) for m in range(minutes)]
    expected = {"latest": every[-1:], "skip": [], "all": every}[policy]
    assert sorted(Job.objects.values_list("scheduled_for", flat=True)) == expected
    assert sorted(ScheduleTick.objects.values_list("due_at", flat=True)) == expected


def next_second(schedule: Schedule) -> datetime.datetime:
    """Wait until the schedule's next due time (per second) has passed; return it."""
    schedule.refresh_from_db()
    due = schedule.next_due_at
    assert wait_for(lambda: Schedule.objects.annotate(n=Now()).filter(pk=schedule.pk, n__gte=due).exists(), 3)
    return due


def test_no_overlap_skips_a_due_time_while_the_previous_job_is_active():
    schedule = make(cron="* * * * * *", no_overlap=True)
    due_ago(schedule, 0.2)
    scheduler = Scheduler("tests:1")
    scheduler.fire_due()
    first = Job.objects.get()
    due = next_second(schedule)
    scheduler.fire_due()
    assert Job.objects.count() == 1, "the previous run is still READY: skipped"
    assert ScheduleTick.objects.get(due_at=due).job_id is None
    schedule.refresh_from_db()
    assert schedule.last_job_id == first.pk and schedule.next_due_at > due
    Job.objects.filter(pk=first.pk).update(status="SUCCESSFUL", active_key=None)
    next_second(schedule)
    scheduler.fire_due()
    assert Job.objects.count() == 2


def test_a_disabled_schedule_never_fires_and_enabling_it_does_not_catch_up():
    clear_of_minute_edges()
    schedule = make(cron="* * * * *")
    due_ago(schedule, 3600)
    schedule.refresh_from_db()
    schedule.disable()
    assert schedule.next_due_at is None
    Scheduler("tests:1").fire_due()
    assert not Job.objects.exists()
    assert Schedule.objects.filter(pk=schedule.pk).enable() == 1
    schedule.refresh_from_db()
    assert schedule.enabled and schedule.next_due_at > timezone.now()
    Scheduler("tests:1").fire_due()
    assert not Job.objects.exists()
    assert Schedule.objects.disable() == 1 and Schedule.objects.active().count() == 0


def test_editing_a_schedule_keeps_its_due_time_unless_its_timing_changed():
    clear_of_minute_edges()
    schedule = make(cron="* * * * *")
    due = due_ago(schedule)
    edited = Schedule.objects.get(pk=schedule.pk)
    edited.args = [5, 6]
    edited.save()
    assert Schedule.objects.get(pk=schedule.pk).next_due_at == due, "an edit never skips a pending due time"
    edited.cron = "0 4 * * *"
    edited.save()
    edited.refresh_from_db()
    assert edited.next_due_at > timezone.now() and edited.next_due_at.hour == 4


def test_the_job_gets_its_due_time_as_an_argument_and_from_current_job(run_jobs):
    clear_of_minute_edges()
    schedule = make(cron="* * * * *", job="tests.jobs.scheduled", args=[], due_time_argument="due_time")
    due = due_ago(schedule)
    Scheduler("tests:1").fire_due()
    worker = run_jobs("--burst", "--no-scheduler")
    assert worker.wait() == 0, worker.output()
    job = Job.objects.get()
    assert job.status == "SUCCESSFUL", job.errors
    assert job.return_value == {"due_time": due.isoformat(), "scheduled_for": due.isoformat()}


def test_schedule_fired_is_sent_after_commit_and_a_raising_receiver_changes_nothing():
    clear_of_minute_edges()
    seen = []

    def receiver(sender, schedule, jobs, due_times, manual, **kwargs):
        seen.append((schedule.name, [job.pk for job in jobs], due_times, manual, connection.in_atomic_block))
        raise RuntimeError("receiver bug")

    schedule_fired.connect(receiver)
    try:
        schedule = make(cron="* * * * *")
        due = due_ago(schedule)
        Scheduler("tests:1").fire_due()
    finally:
        schedule_fired.disconnect(receiver)
    job = Job.objects.get()
    assert seen == [("report", [job.pk], [due], False, False)]
    schedule.refresh_from_db()
    assert schedule.next_due_at > due


def test_run_now_enqueues_a_manual_run_without_moving_the_schedule():
    schedule = make(cron="0 3 * * *")
    before = schedule.next_due_at
    job, created = run_now(schedule)
    assert created and job.name == "tests.jobs.add" and job.scheduled_for is not None
    schedule.refresh_from_db()
    assert schedule.next_due_at == before and schedule.last_job_id is None
    assert (schedule.last_manual_job_id, schedule.last_manual_at) == (job.pk, job.scheduled_for)
    assert not ScheduleTick.objects.exists()


def test_saving_a_schedule_wakes_the_schedulers_of_this_process_on_commit():
    before = wakeup.schedule_generation()
    with transaction.atomic():
        schedule = make()
        assert wakeup.schedule_generation() == before
    assert wakeup.schedule_generation() == before + 1
    schedule.delete()
    assert wakeup.schedule_generation() == before + 2


# DBJOBS_SCHEDULES


SETTINGS = {
    "nightly": {"job": "tests.jobs.add", "cron": "30 2 * * *", "timezone": "Europe/Paris", "args": [1, 2]},
    "often": {"job": "tests.jobs.tick", "cron": "*/10 * * * * *", "queue": "sync", "priority": 10},
}


def test_settings_schedules_are_created_and_updated_when_a_worker_syncs():
    with override_settings(DBJOBS_SCHEDULES=SETTINGS):
        sync_settings()
    nightly, often = Schedule.objects.order_by("name")
    assert (nightly.name, nightly.timezone, nightly.args, nightly.defined_in) == (
        "nightly",
        "Europe/Paris",
        [1, 2],
        DefinedIn.SETTINGS,
    )
    assert (often.queue, often.priority, often.cron) == ("sync", 10, "*/10 * * * * *")
    due = often.next_due_at
    changed = {**SETTINGS, "often": {**SETTINGS["often"], "priority": 20}}
    with override_settings(DBJOBS_SCHEDULES=changed):
        sync_settings()
    often.refresh_from_db()
    assert often.priority == 20 and often.next_due_at == due, "same timing: the pending due time stays"


def test_settings_sync_keeps_an_operators_disable_and_retires_what_left_the_settings():
    with override_settings(DBJOBS_SCHEDULES=SETTINGS):
        sync_settings()
        Schedule.objects.get(name="nightly").disable()  # the operator, in the admin
        sync_settings()  # a worker restarts
        assert not Schedule.objects.get(name="nightly").enabled
    with override_settings(DBJOBS_SCHEDULES={"nightly": {**SETTINGS["nightly"], "cron": "0 3 * * *"}}):
        sync_settings()
    nightly, often = Schedule.objects.order_by("name")
    assert nightly.cron == "0 3 * * *" and not nightly.enabled and nightly.next_due_at is None
    assert often.removed_at is not None and often.next_due_at is None and often.enabled
    assert Schedule.objects.active().count() == 0
    turned_off = {**SETTINGS, "nightly": {**SETTINGS["nightly"], "enabled": False}}
    with override_settings(DBJOBS_SCHEDULES=turned_off):
        sync_settings()  # the developer now says enabled=False: that applies, and "often" is back
    nightly, often = Schedule.objects.order_by("name")
    assert not nightly.enabled and often.removed_at is None and often.next_due_at is not None
    turned_on = {**SETTINGS, "nightly": {**SETTINGS["nightly"], "enabled": True}}
    with override_settings(DBJOBS_SCHEDULES=turned_on):
        sync_settings()
    assert Schedule.objects.get(name="nightly").enabled


@pytest.mark.parametrize(
    "schedules, message",
    [
        ([], "must be a dict"),
        ({"x": "0 3 * * *"}, "DBJOBS_SCHEDULES['x'] must be a dict"),
        ({"x": {"job": "tests.jobs.tick"}}, "DBJOBS_SCHEDULES['x'] lacks 'cron'"),
        ({"x": {"job": "tests.jobs.tick", "cron": "0 3 * * *", "quue": "a"}}, "unknown keys 'quue'"),
        ({"x": {"job": "tests.jobs.tick", "cron": "0 3 * *"}}, "DBJOBS_SCHEDULES['x']['cron']: The cron"),
        ({"x": {"job": "tests.jobs.tick", "cron": "@daily", "timezone": "Mars/X"}}, "['timezone']: Unknown"),
        ({"x": {"job": "tests.jobs.nope", "cron": "@daily"}}, "['job']: 'tests.jobs.nope' is not"),
        ({"x": {"job": "tests.jobs.tick", "cron": "@daily", "args": [1]}}, "['args']: The arguments do"),
        ({"x": {"job": "tests.jobs.tick", "cron": "@daily", "priority": 101}}, "['priority']: priority must"),
        ({"x": {"job": "tests.jobs.tick", "cron": "@daily", "enabled": "yes"}}, "['enabled']: enabled must"),
    ],
)
def test_invalid_settings_schedules_are_system_check_errors_naming_the_schedule(schedules, message):
    with override_settings(DBJOBS_SCHEDULES=schedules):
        errors = [e for e in checks.check_settings() if e.id == "dbjobs.E017"]
        assert any(message in e.msg for e in errors), [e.msg for e in errors]
        with pytest.raises(InvalidSchedule):
            sync_settings()
    assert not Schedule.objects.exists()


def test_valid_settings_schedules_pass_the_checks():
    with override_settings(DBJOBS_SCHEDULES=SETTINGS):
        assert not [e for e in checks.check_settings() if e.id == "dbjobs.E017"]


# manage.py dbjobs_schedules


def test_dbjobs_schedules_lists_schedules_readably_and_as_json(capsys):
    make(cron="30 2 * * *", timezone="Europe/Paris")
    make(name="off", cron="@hourly").disable()
    call_command("dbjobs_schedules")
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["NAME", "CRON", "TIMEZONE"]
    report = next(line for line in lines if line.startswith("report"))
    assert "02:30:00" in report and "Europe/Paris" in report and "enabled" in report, out
    assert any(line.startswith("off") and "disabled" in line for line in lines), out
    call_command("dbjobs_schedules", "--json")
    data = json.loads(capsys.readouterr().out)
    report = next(item for item in data if item["name"] == "report")
    assert report["enabled"] is True and report["cron"] == "30 2 * * *"
    assert report["next_due_at"].endswith("+00:00") and "T02:30:00+0" in report["next_due_local"]
    assert report["last_job"] is None


def test_dbjobs_schedules_run_now_enqueues_one_job(capsys):
    make(cron="30 2 * * *")
    call_command("dbjobs_schedules", "--run-now", "report")
    job = Job.objects.get()
    assert job.pk in capsys.readouterr().out
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="No schedule named 'nope'"):
        call_command("dbjobs_schedules", "--run-now", "nope")


def test_a_schedule_without_queue_or_priority_uses_the_jobs_own():
    clear_of_minute_edges()
    schedule = make(cron="* * * * *", job="tests.jobs.send_email", args=["ada@example.com"])
    assert (schedule.queue, schedule.priority) == (None, None)
    due_ago(schedule)
    Scheduler("tests:1").fire_due()
    job = Job.objects.get()
    assert (job.queue, job.priority, job.max_attempts) == ("emails", 5, 7)


def test_raising_receivers_neither_block_nor_undo_a_firing():
    from django.db.models.signals import post_save, pre_save

    from django_dbjobs.signals import job_enqueued

    calls = []

    def raising(sender, **kwargs):
        calls.append(connection.in_atomic_block)
        raise RuntimeError("receiver bug")

    for signal in (pre_save, post_save, job_enqueued):
        signal.connect(raising, sender=Job)
    try:
        clear_of_minute_edges()
        schedule = make(cron="* * * * *")
        due = due_ago(schedule)
        Scheduler("tests:1").fire_due()
    finally:
        for signal in (pre_save, post_save, job_enqueued):
            signal.disconnect(raising, sender=Job)
    assert Job.objects.get().scheduled_for == due
    assert ScheduleTick.objects.get().due_at == due
    assert Schedule.objects.get().next_due_at > due
    assert calls == [False], "job_enqueued only, after the commit; no save signals inside the firing"


def test_one_broken_schedule_never_stops_the_others():
    clear_of_minute_edges()
    broken, fine = make("a-broken", cron="* * * * *"), make("b-fine", cron="* * * * *")
    Schedule.objects.filter(pk=broken.pk).update(args=5)  # written behind validation's back
    broken_due, fine_due = due_ago(broken), due_ago(fine)
    scheduler = Scheduler("tests:1")
    scheduler.fire_due()
    assert list(Job.objects.values_list("scheduled_for", flat=True)) == [fine_due]
    broken.refresh_from_db()
    assert broken.next_due_at == broken_due and "TypeError" in broken.last_error
    assert scheduler.fire_due() > 0, "the broken schedule is set aside, not retried in a loop"
    Schedule.objects.filter(pk=broken.pk).update(args=[1, 2])  # repaired
    Scheduler("tests:2").fire_due()
    broken.refresh_from_db()
    assert Job.objects.filter(scheduled_for=broken_due, args=[1, 2]).exists() and broken.last_error == ""


def test_a_schedule_written_around_save_gets_a_next_due_time_and_fires():
    Schedule.objects.bulk_create([Schedule(name="bulk", cron="* * * * * *", job="tests.jobs.tick")])
    assert Schedule.objects.get().next_due_at is None
    scheduler = Scheduler("tests:1")
    scheduler.fire_due()
    schedule = Schedule.objects.get()
    assert schedule.next_due_at is not None
    next_second(schedule)
    scheduler.fire_due()
    assert Job.objects.filter(scheduled_for=schedule.next_due_at).exists()
    Schedule.objects.disable()
    Schedule.objects.update(enabled=True)  # not enable(): no next due time
    scheduler.fire_due()
    assert Schedule.objects.get().next_due_at is not None


def test_many_schedules_due_a_little_later_do_not_make_the_scheduler_spin():
    Schedule.objects.bulk_create(
        [Schedule(name=f"tenant-{n}", cron="0 3 * * *", job="tests.jobs.tick") for n in range(101)]
    )
    Schedule.objects.update(next_due_at=Now() + datetime.timedelta(seconds=6))
    wait = Scheduler("tests:1").fire_due()
    assert 4 < wait <= 6 and not Job.objects.exists()


@pytest.mark.skipif(connection.vendor == "sqlite", reason="SQLite has no row locks")
def test_a_schedule_row_locked_by_another_transaction_never_holds_up_the_scheduler():
    clear_of_minute_edges()
    schedule = make(cron="* * * * *")
    due = due_ago(schedule)
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                Schedule.objects.select_for_update().get(pk=schedule.pk)  # an admin edit, a data migration
                locked.set()
                release.wait(30)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(10)
        started = time.monotonic()
        wait = Scheduler("tests:1").fire_due()
        assert time.monotonic() - started < 2 and wait <= 1.5, "the scheduler waited for the lock"
        assert not Job.objects.exists()
    finally:
        release.set()
        holder.join(30)
    Scheduler("tests:1").fire_due()
    assert Job.objects.get().scheduled_for == due


def test_a_due_time_written_by_an_sql_expression_still_fires():
    schedule = make(cron="* * * * *")
    Schedule.objects.filter(pk=schedule.pk).update(next_due_at=Now())
    schedule.refresh_from_db()
    Scheduler("tests:1").fire_due()
    assert Job.objects.get().scheduled_for == schedule.next_due_at
    schedule.refresh_from_db()
    assert schedule.last_error == ""


def test_switching_a_schedule_back_on_with_update_does_not_catch_up():
    schedule = make(cron="* * * * *", missed_runs="all")
    Schedule.objects.filter(pk=schedule.pk).update(enabled=False)
    Schedule.objects.filter(pk=schedule.pk).update(next_due_at=Now() - datetime.timedelta(hours=2))
    Schedule.objects.filter(pk=schedule.pk).update(enabled=True)  # clears next_due_at
    assert Schedule.objects.get().next_due_at is None
    Scheduler("tests:1").fire_due()
    assert not Job.objects.exists()
    assert Schedule.objects.get().next_due_at > timezone.now() - datetime.timedelta(seconds=5)


def test_save_with_update_fields_of_a_timing_field_moves_the_due_time():
    schedule = make(cron="0 3 * * *")
    schedule.cron = "0 4 * * *"
    schedule.save(update_fields=["cron"])
    schedule.refresh_from_db()
    assert schedule.next_due_at.hour == 4


def test_schedules_need_use_tz():
    with override_settings(USE_TZ=False):
        with pytest.raises(ValidationError, match="USE_TZ = True"):
            make()
        with override_settings(DBJOBS_SCHEDULES=SETTINGS):
            assert any("USE_TZ = True" in e.msg for e in checks.check_settings() if e.id == "dbjobs.E017")
    assert not Schedule.objects.exists()


def test_the_missed_due_times_line_says_the_catch_up_window_stopped_the_run(caplog):
    schedule = make(cron="0 0 1 1 *", missed_runs="latest", catch_up_window=600)
    due = due_ago(schedule, 3600)
    with caplog.at_level(logging.WARNING, logger="django_dbjobs"):
        Scheduler("tests:1").fire_due()
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Schedule missed")]
    assert "name=report missed=1 policy=latest ran=0" in line
    assert f"the latest, due {due.isoformat()}, was " in line
    assert line.endswith("past its catch_up_window of 600 s, so none ran")
    assert not Job.objects.exists()
