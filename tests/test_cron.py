"""cron.py: due times, daylight saving and missed-run plans. Pure: no database."""

import datetime
import time

import pytest

from django_dbjobs.cron.expression import Cron
from django_dbjobs.cron.missed_runs import MAX_CATCH_UP, plan
from django_dbjobs.exceptions import InvalidSchedule

UTC = datetime.timezone.utc
WINDOW = datetime.timedelta(minutes=10)


def at(text: str) -> datetime.datetime:
    """An aware datetime from ISO text (UTC when no offset is given)."""
    value = datetime.datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def fires(cron: Cron, start: str, end: str) -> list[str]:
    """What a scheduler fires between two instants: each due time, as local ISO text."""
    result, due, end_at = [], cron.next_after(at(start)), at(end)
    while due <= end_at:
        result.append(due.astimezone(cron._tz).isoformat())
        due = cron.next_after(due)
    return result


@pytest.mark.parametrize(
    "expression, after, expected",
    [
        ("30 2 * * *", "2026-05-01T00:00", ["2026-05-01T02:30:00+00:00", "2026-05-02T02:30:00+00:00"]),
        ("*/10 * * * * *", "2026-05-01T00:00:03", ["2026-05-01T00:00:10+00:00", "2026-05-01T00:00:20+00:00"]),
        ("* * * * * *", "2026-05-01T00:00:00", ["2026-05-01T00:00:01+00:00", "2026-05-01T00:00:02+00:00"]),
        ("@hourly", "2026-05-01T00:00", ["2026-05-01T01:00:00+00:00", "2026-05-01T02:00:00+00:00"]),
        ("@daily", "2026-05-01T00:00", ["2026-05-02T00:00:00+00:00", "2026-05-03T00:00:00+00:00"]),
        ("@weekly", "2026-05-01T00:00", ["2026-05-03T00:00:00+00:00", "2026-05-10T00:00:00+00:00"]),
        ("@monthly", "2026-05-01T00:00", ["2026-06-01T00:00:00+00:00", "2026-07-01T00:00:00+00:00"]),
        ("@yearly", "2026-05-01T00:00", ["2027-01-01T00:00:00+00:00", "2028-01-01T00:00:00+00:00"]),
        ("0 9 * * mon-fri", "2026-05-01T10:00", ["2026-05-04T09:00:00+00:00", "2026-05-05T09:00:00+00:00"]),
    ],
)
def test_due_times_follow_the_expression(expression, after, expected):
    cron = Cron(expression)
    first = cron.next_after(at(after))
    assert [first.isoformat(), cron.next_after(first).isoformat()] == expected


def test_due_times_are_in_the_schedules_timezone_and_stored_in_utc():
    due = Cron("30 2 * * *", "Europe/Paris").next_after(at("2026-07-01T12:00"))
    assert due.tzinfo is UTC and due == at("2026-07-02T00:30")  # 02:30 in Paris, summer time


def test_next_after_is_strictly_after():
    cron = Cron("0 * * * *")
    assert cron.next_after(at("2026-05-01T01:00")) == at("2026-05-01T02:00")
    assert cron.next_after(at("2026-05-01T00:59:59.999")) == at("2026-05-01T01:00")


@pytest.mark.parametrize(
    "zone, start, end, expected",
    [
        # Spring forward: 02:00 -> 03:00 local. The 02:30 job runs once, at 03:00.
        (
            "Europe/Paris",
            "2026-03-28T00:00",
            "2026-03-30T12:00",
            ["2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"],
        ),
        (
            "America/New_York",
            "2026-03-07T12:00",
            "2026-03-09T12:00",
            ["2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"],
        ),
        # Fall back: 03:00 -> 02:00 local in Paris, 02:00 -> 01:00 in New York: once, at the first.
        (
            "Europe/Paris",
            "2026-10-24T00:00",
            "2026-10-26T12:00",
            ["2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"],
        ),
        (
            "America/New_York",
            "2026-10-31T12:00",
            "2026-11-02T12:00",
            ["2026-11-01T02:30:00-05:00", "2026-11-02T02:30:00-05:00"],
        ),
    ],
)
def test_a_daily_0230_job_runs_once_on_each_daylight_saving_day(zone, start, end, expected):
    assert fires(Cron("30 2 * * *", zone), start, end) == expected


def test_a_daily_job_in_the_repeated_hour_runs_once():
    runs = fires(Cron("30 1 * * *", "America/New_York"), "2026-10-31T12:00", "2026-11-01T23:00")
    assert runs == ["2026-11-01T01:30:00-04:00"]  # not again at 01:30 EST, an hour later


def test_an_hourly_job_runs_every_real_hour_when_clocks_go_back():
    runs = fires(Cron("30 * * * *", "Europe/Paris"), "2026-10-24T23:00", "2026-10-25T03:00")
    assert runs == [
        "2026-10-25T01:30:00+02:00",
        "2026-10-25T02:30:00+02:00",
        "2026-10-25T02:30:00+01:00",  # the repeated hour: a real hour later
        "2026-10-25T03:30:00+01:00",
    ]
    assert len(set(runs)) == len(runs)


def test_jobs_due_in_the_skipped_hour_collapse_into_one_run_at_its_end():
    runs = fires(Cron("*/20 * * * *", "Europe/Paris"), "2026-03-29T00:30", "2026-03-29T01:30")
    assert runs == [
        "2026-03-29T01:40:00+01:00",
        "2026-03-29T03:00:00+02:00",  # 02:00, 02:20, 02:40 and 03:00 itself: one run
        "2026-03-29T03:20:00+02:00",
    ]


def test_a_per_second_schedule_across_a_transition_never_repeats_or_stalls():
    cron = Cron("* * * * * *", "Europe/Paris")
    runs = fires(cron, "2026-10-25T00:59:50", "2026-10-25T01:00:10")
    assert len(runs) == 20 and len(set(runs)) == 20
    assert [at(run) - at(runs[0]) for run in runs] == [datetime.timedelta(seconds=i) for i in range(20)]


@pytest.mark.parametrize(
    "expression, timezone, message",
    [
        ("", "UTC", "non-empty string"),
        (None, "UTC", "non-empty string"),
        ("* * *", "UTC", "has 3 fields"),
        ("* * * * * * *", "UTC", "has 7 fields"),
        ("61 * * * *", "UTC", "The minute field of the cron expression '61 * * * *' is 61"),
        ("* * * * fri-mon-x", "UTC", "day-of-week field of the cron expression '* * * * fri-mon-x' has x"),
        ("@fortnightly", "UTC", "Unknown cron alias"),
        ("0 0 31 2 *", "UTC", "'0 0 31 2 *' never matches: February has no day 31"),
        ("H * * * *", "UTC", "is H, a hashed value"),
        ("R 3 * * *", "UTC", "uses R"),
        ("0 R * * *", "UTC", "uses R"),
        ("* * * * *", "Europe/Pari", "Unknown timezone 'Europe/Pari'"),
        ("* * * * *", "", "IANA name"),
        ("* * * * *", "../etc/passwd", "Unknown timezone"),
    ],
)
def test_invalid_expressions_and_timezones_are_refused_with_a_clear_message(expression, timezone, message):
    with pytest.raises(InvalidSchedule, match=message.replace("*", r"\*")):
        Cron(expression, timezone)


@pytest.mark.parametrize(
    "policy, expression, next_due, now, expected_runs, missed",
    [
        # On time, or a few seconds late: every policy runs it.
        ("latest", "* * * * *", "12:00", "12:00:00.3", ["12:00"], 0),
        ("skip", "* * * * *", "12:00", "12:00:04", ["12:00"], 0),
        ("all", "* * * * *", "12:00", "12:00:00.3", ["12:00"], 0),
        # Down from 11:31 to 12:00:30: latest runs 12:00 (younger than the window), skip
        # none, all every one (the next test).
        ("latest", "* * * * *", "11:31", "12:00:30", ["12:00"], 29),
        ("skip", "* * * * *", "11:31", "12:00:30", [], 30),
        # The latest missed due time is 15 minutes old, older than the window.
        ("latest", "45 11 * * *", "11:45", "12:00", [], 1),
        ("skip", "45 11 * * *", "11:45", "12:00", [], 1),
        ("all", "45 11 * * *", "11:45", "12:00", ["11:45"], 0),
        # A due time just past the ON_TIME tolerance is missed; latest still runs it.
        ("latest", "45 11 * * *", "11:45", "11:45:06", ["11:45"], 0),
        ("skip", "45 11 * * *", "11:45", "11:45:06", [], 1),
        # Not due yet.
        ("latest", "* * * * *", "12:01", "12:00:30", [], 0),
    ],
)
def test_missed_run_policies(policy, expression, next_due, now, expected_runs, missed):
    day = "2026-05-01T"
    result = plan(Cron(expression), at(day + next_due), at(day + now), policy, WINDOW)
    assert [run.isoformat() for run in result.run] == [at(day + r).isoformat() for r in expected_runs]
    assert result.missed == missed
    if result.next_due != at(day + next_due):
        assert result.next_due > at(day + now)
    else:
        assert not expected_runs and not missed


NOW = at("2026-05-01T12:00:00.300")


def test_the_all_policy_runs_every_missed_due_time_and_moves_past_now():
    result = plan(Cron("* * * * *"), at("2026-05-01T11:31"), NOW, "all", WINDOW)
    assert len(result.run) == 30
    assert (result.run[0], result.run[-1]) == (at("2026-05-01T11:31"), at("2026-05-01T12:00"))
    assert result.next_due == at("2026-05-01T12:01")


def test_due_times_a_few_seconds_late_all_run_under_every_policy():
    now = at("2026-05-01T12:00:03.5")
    for policy in ("latest", "skip", "all"):
        result = plan(Cron("* * * * * *"), at("2026-05-01T12:00:00"), now, policy, WINDOW)
        assert [r.second for r in result.run] == [0, 1, 2, 3], policy


def test_a_year_of_downtime_is_capped_and_computed_quickly():
    cron = Cron("* * * * * *")
    started = time.perf_counter()
    result = plan(cron, at("2025-05-01T00:00"), NOW, "all", WINDOW)
    assert time.perf_counter() - started < 5
    assert len(result.run) == MAX_CATCH_UP and result.more_missed
    assert result.run[-1] == at("2026-05-01T12:00:00") and result.next_due == at("2026-05-01T12:00:01")
    latest = plan(cron, at("2025-05-01T00:00"), NOW, "latest", WINDOW)
    assert [r.isoformat() for r in latest.run][-1] == "2026-05-01T12:00:00+00:00"
    assert len(latest.run) <= 6  # the due times of the last 5 seconds, none older


def test_months_and_days_named_with_an_r_are_not_taken_for_random_values():
    assert Cron("0 3 * mar,apr *").next_after(at("2026-01-01T00:00")) == at("2026-03-01T03:00")


@pytest.mark.parametrize(
    "expression, zone, first, until",
    [
        ("* * * * *", "UTC", "2026-05-01T10:01", "2026-05-01T12:00:30"),  # 120: more than MAX_CATCH_UP
        ("*/7 * * * *", "Europe/Paris", "2026-10-24T22:00", "2026-10-25T04:00"),  # across fall-back
        ("30 * * * *", "Europe/Paris", "2026-10-22T00:00", "2026-10-27T00:00"),
        ("*/5 * * * *", "America/New_York", "2026-03-07T20:00", "2026-03-08T12:00"),  # across spring-forward
        ("*/20 * * * *", "Australia/Lord_Howe", "2026-04-04T10:00", "2026-04-05T10:00"),  # a 30-minute shift
        ("* * * * * *", "Europe/Paris", "2026-10-25T00:55", "2026-10-25T01:05"),
    ],
)
def test_the_latest_due_times_match_walking_every_one(expression, zone, first, until):
    cron = Cron(expression, zone)
    start = cron.next_after(at(first))
    every = []
    due = start
    while due <= at(until):
        every.append(due)
        due = cron.next_after(due)
    times, earlier, exact = cron.due_times(start, at(until), MAX_CATCH_UP)
    assert times == every[-MAX_CATCH_UP:]
    assert earlier == max(len(every) - MAX_CATCH_UP, 0) and exact


@pytest.mark.parametrize(
    "expression, first, now",
    [
        ("* * 9-17 * * mon-fri", "2026-05-01T12:00", "2026-05-04T08:00"),  # a weekend of office hours
        ("* * * * jan *", "2026-01-01T00:00", "2026-12-01T00:00"),  # eleven months without a due time
        ("* * * * * *", "2020-01-01T00:00", "2026-05-01T12:00"),  # six years of seconds
    ],
)
def test_plans_after_long_downtime_stay_fast(expression, first, now):
    cron = Cron(expression)
    for policy in ("latest", "skip", "all"):
        started = time.perf_counter()
        result = plan(cron, cron.next_after(at(first)), at(now), policy, WINDOW)
        assert time.perf_counter() - started < 1.0, policy
        assert result.next_due > at(now) and len(result.run) <= MAX_CATCH_UP
        assert result.missed >= MAX_CATCH_UP and result.more_missed


@pytest.mark.parametrize(
    "expression, zone, first, until",
    [
        ("* 2 * * *", "Europe/Paris", "2026-03-27T00:00", "2026-03-29T02:00"),  # the skipped hour: one run
        ("0,30 2,3 * * *", "America/New_York", "2026-03-05T00:00", "2026-03-09T12:00"),
        ("*/15 1-3 * * *", "Europe/Paris", "2026-10-20T00:00", "2026-10-26T12:00"),
    ],
)
def test_catching_up_across_a_clock_change_finds_the_latest_due_times(expression, zone, first, until):
    test_the_latest_due_times_match_walking_every_one(expression, zone, first, until)


@pytest.mark.parametrize(
    "expression, zone, after, repeated",
    [
        # Clocks go back at midnight: the repeated hour is 23:00 on Saturday.
        ("*/10 * * * sat", "America/Santiago", "2026-04-04T02:00", "2026-04-04T23:00:00-04:00"),
        ("0 * * * sat", "Asia/Beirut", "2026-10-24T00:00", "2026-10-24T23:00:00+02:00"),
    ],
)
def test_an_every_hour_job_runs_in_a_repeated_hour_followed_by_days_without_runs(
    expression, zone, after, repeated
):
    cron = Cron(expression, zone)
    runs = fires(cron, after, "2026-12-31T00:00")[:200]
    assert repeated in runs


@pytest.mark.parametrize(
    "policy, window, reason",
    [
        (
            "latest",
            WINDOW,
            "the latest, due 2026-05-01T11:30:00+00:00, was 1800 s late, "
            "past its catch_up_window of 600 s, so none ran",
        ),
        ("latest", datetime.timedelta(hours=1), "missed_runs=latest runs the latest missed due time only"),
        ("skip", WINDOW, "missed_runs=skip runs none"),
    ],
)
def test_a_plan_says_why_its_missed_due_times_did_not_run(policy, window, reason):
    result = plan(Cron("30 * * * *"), at("2026-05-01T09:30"), NOW, policy, window)
    assert result.reason == reason
