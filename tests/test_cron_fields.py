"""cron_fields.py: a cron error names the field and its values, or says why it never matches. No database."""

import datetime

import pytest

from django_dbjobs.cron.expression import Cron
from django_dbjobs.exceptions import InvalidSchedule

UTC = datetime.timezone.utc
MINUTES = "minutes run from 0 to 59."
HOURS = "hours run from 0 to 23."
DAYS = "days of the month run from 1 to 31."
MONTHS = "months run from 1 to 12, or JAN to DEC."
WEEKDAYS = "days of the week run from 0 to 7 (0 and 7 are Sunday), or SUN to SAT."
FORMS = "written as a number, a range such as 1-5, a list such as 1,5 or a step such as */5."


def refusal(expression: str) -> str:
    with pytest.raises(InvalidSchedule) as caught:
        Cron(expression)
    return str(caught.value)


@pytest.mark.parametrize(
    "expression, field, says",
    [
        ("61 * * * *", "minute", f"is 61; {MINUTES}"),
        ("0,61 * * * *", "minute", f"has 61; {MINUTES}"),
        ("60-5 * * * *", "minute", f"has 60; {MINUTES}"),
        ("* 24 * * *", "hour", f"is 24; {HOURS}"),
        ("0 9-24 * * *", "hour", f"has 24; {HOURS}"),
        ("0 0 0 * *", "day-of-month", f"is 0; {DAYS}"),
        ("0 0 0-5 * *", "day-of-month", f"has 0; {DAYS}"),
        ("0 0 32 * *", "day-of-month", f"is 32; {DAYS}"),
        ("0 0 32W * *", "day-of-month", f"is 32W; {DAYS}"),
        ("0 0 1 0 *", "month", f"is 0; {MONTHS}"),
        ("0 0 1 13 *", "month", f"is 13; {MONTHS}"),
        ("0 0 * * 8", "day-of-week", f"is 8; {WEEKDAYS}"),
        ("0 0 * * 0-8", "day-of-week", f"has 8; {WEEKDAYS}"),
        ("0 0 * * L8", "day-of-week", f"has 8; {WEEKDAYS}"),
        ("60 * * * * *", "second", "is 60; seconds run from 0 to 59."),
        ("0 60 * * * *", "minute", f"is 60; {MINUTES}"),
        ("0 0 25 * * *", "hour", f"is 25; {HOURS}"),
    ],
)
def test_a_value_out_of_range_names_its_field_and_the_fields_range(expression, field, says):
    assert refusal(expression) == f"The {field} field of the cron expression {expression!r} {says}"


@pytest.mark.parametrize(
    "expression, field, says",
    [
        ("0 0 1 foo *", "month", f"is foo, which is not a month; {MONTHS}"),
        ("0 0 * mon *", "month", f"is mon, which is not a month; {MONTHS}"),
        ("0 0 * * jan", "day-of-week", f"is jan, which is not a day of the week; {WEEKDAYS}"),
        ("0 0 * * L", "day-of-week", f"is L, which is not a day of the week; {WEEKDAYS}"),
        ("* * * * fri-mon-x", "day-of-week", f"has x, which is not a day of the week; {WEEKDAYS}"),
        ("a * * * *", "minute", f"is a, which is not a number; {MINUTES}"),
        ("0 noon * * *", "hour", f"is noon, which is not a number; {HOURS}"),
        ("0 0 LW * *", "day-of-month", f"is LW, which is not a number; {DAYS}"),
    ],
)
def test_an_unknown_name_names_its_field_and_what_the_field_takes(expression, field, says):
    assert refusal(expression) == f"The {field} field of the cron expression {expression!r} {says}"


@pytest.mark.parametrize(
    "expression, field, says",
    [
        ("*/0 * * * *", "minute", "is */0; a step must be a whole number of 1 or more, as in */5."),
        ("*/1.5 * * * *", "minute", "is */1.5; a step must be a whole number of 1 or more, as in */5."),
        ("0 0 * * */0", "day-of-week", "is */0; a step must be a whole number of 1 or more, as in */5."),
        ("0,*/0 * * * *", "minute", "has */0; a step must be a whole number of 1 or more, as in */5."),
        ("1-2-3 * * * *", "minute", f"is 1-2-3, which cron cannot read; minutes run from 0 to 59, {FORMS}"),
        ("5- * * * *", "minute", f"is 5-, which cron cannot read; minutes run from 0 to 59, {FORMS}"),
        ("-5 * * * *", "minute", f"is -5, which cron cannot read; minutes run from 0 to 59, {FORMS}"),
        ("1.5 * * * *", "minute", f"is 1.5, which cron cannot read; minutes run from 0 to 59, {FORMS}"),
        ("0 0 L-2 * *", "day-of-month", f"is L-2, which cron cannot read; {DAYS[:-1]}, {FORMS}"),
        (
            "1,,2 * * * *",
            "minute",
            "is 1,,2, a list with an empty item; separate the values with single commas, as in 1,5.",
        ),
        (
            "? 0 * * *",
            "minute",
            "is ?; ? (no specific value) is allowed only in the day-of-month and day-of-week fields.",
        ),
        ("0 0 ?5 * *", "day-of-month", "is ?5; ? stands alone in its field."),
        (
            "0 0 1,15W * *",
            "day-of-month",
            "has 15W; W (the nearest weekday) takes a single day, not a list, as in 15W.",
        ),
        (
            "0 0 * * 5#6",
            "day-of-week",
            "is 5#6; the number after # is the week of the month, from 1 to 5, as in FRI#2.",
        ),
        (
            "0 0 * * fri#0",
            "day-of-week",
            "is fri#0; the number after # is the week of the month, from 1 to 5, as in FRI#2.",
        ),
        (
            "0 0 * * 1,5#2",
            "day-of-week",
            "is 1,5#2, which mixes plain days with days of a given week (# or L); "
            "write one kind or the other, as in FRI#2,FRI#4.",
        ),
        (
            "H * * * *",
            "minute",
            f"is H, a hashed value, which django-dbjobs does not support; write the value: {MINUTES}",
        ),
        (
            "0 H(0-11)/2 * * *",
            "hour",
            f"is H(0-11)/2, a hashed value, which django-dbjobs does not support; write the value: {HOURS}",
        ),
        (
            "R 3 * * *",
            "minute",
            f"uses R (a random value), which each worker would draw differently; write the value: {MINUTES}",
        ),
    ],
)
def test_a_malformed_field_is_named_with_what_it_should_be(expression, field, says):
    assert refusal(expression) == f"The {field} field of the cron expression {expression!r} {says}"


def test_every_bad_field_is_reported_at_once():
    assert refusal("61 R * * 8") == (
        f"The minute field of the cron expression '61 R * * 8' is 61; {MINUTES} "
        "Its hour field uses R (a random value), which each worker would draw differently; "
        f"write the value: {HOURS} "
        f"Its day-of-week field is 8; {WEEKDAYS}"
    )


def test_fields_split_by_a_space_croniter_does_not_split_on_are_explained():
    assert refusal("0\N{NO-BREAK SPACE}0 * * *") == (
        "The cron expression '0\\xa00 * * *' cannot be read; separate its fields with plain spaces."
    )


@pytest.mark.parametrize(
    "expression, reason",
    [
        ("0 0 31 2 *", "February has no day 31"),
        ("0 0 30 2 *", "February has no day 30"),
        ("0 0 30,31 feb *", "February has no day 30 or 31"),
        ("0 0 30-31/1 2 *", "February has no day 30 or 31"),
        ("0 0 31 4 *", "April has no day 31"),
        ("0 0 31 2,4 *", "February and April have no day 31"),
        ("0 0 31 4,6,9,11 *", "April, June, September and November have no day 31"),
        ("0 0 31 2 ?", "February has no day 31"),
        ("0 0 0 31 2 *", "February has no day 31"),
    ],
)
def test_a_day_no_month_of_the_expression_has_is_said_plainly(expression, reason):
    assert refusal(expression) == f"The cron expression {expression!r} never matches: {reason}."


def test_a_due_time_past_the_calendars_end_says_the_expression_never_matches():
    with pytest.raises(InvalidSchedule) as caught:
        Cron("0 0 29 2 *").next_after(datetime.datetime(9999, 3, 1, tzinfo=UTC))
    assert str(caught.value) == (
        "The cron expression '0 0 29 2 *' never matches: no date fits all of its fields together."
    )


@pytest.mark.parametrize(
    "expression, first, second",
    [
        ("0 0 L * *", "2026-05-31T00:00", "2026-06-30T00:00"),
        ("0 0 15-L * *", "2026-05-15T00:00", "2026-05-16T00:00"),
        ("0 0 15W * *", "2026-05-15T00:00", "2026-06-15T00:00"),
        ("0 0 W15 * *", "2026-05-15T00:00", "2026-06-15T00:00"),
        ("0 0 ? * *", "2026-05-02T00:00", "2026-05-03T00:00"),
        ("0 0 * * ?", "2026-05-02T00:00", "2026-05-03T00:00"),
        ("0 0 * * 5#2", "2026-05-08T00:00", "2026-06-12T00:00"),
        ("0 0 * * fri#2", "2026-05-08T00:00", "2026-06-12T00:00"),
        ("0 0 * * FRI#2,FRI#4", "2026-05-08T00:00", "2026-05-22T00:00"),
        ("0 0 * * mon-fri#2", "2026-05-08T00:00", "2026-05-11T00:00"),
        ("0 0 * * L5", "2026-05-29T00:00", "2026-06-26T00:00"),
        ("0 0 * * 7", "2026-05-03T00:00", "2026-05-10T00:00"),
        ("0 0 * * 0-7", "2026-05-02T00:00", "2026-05-03T00:00"),
        ("0 0 * * sun-7", "2026-05-02T00:00", "2026-05-03T00:00"),
        ("0 0 * * sat-sun", "2026-05-02T00:00", "2026-05-03T00:00"),
        ("0 0 * * mon,wed-fri", "2026-05-04T00:00", "2026-05-06T00:00"),
        ("0 0 * * MON/2", "2026-05-04T00:00", "2026-05-06T00:00"),
        ("50-10 * * * *", "2026-05-01T00:01", "2026-05-01T00:02"),
        ("59/15 * * * *", "2026-05-01T00:59", "2026-05-01T01:59"),
        ("5/10 * * * *", "2026-05-01T00:05", "2026-05-01T00:15"),
        ("*/99 * * * *", "2026-05-01T01:00", "2026-05-01T02:00"),
        ("0 0 1 12-1 *", "2026-12-01T00:00", "2027-01-01T00:00"),
        ("0 0 * JAN-DEC *", "2026-05-02T00:00", "2026-05-03T00:00"),
        ("0 0 1 jan/2 *", "2026-07-01T00:00", "2026-09-01T00:00"),
        ("0 12 * mar,apr *", "2027-03-01T12:00", "2027-03-02T12:00"),
        ("0 0 1-31/40 * *", "2026-06-01T00:00", "2026-07-01T00:00"),
        ("0 0 30 * *", "2026-05-30T00:00", "2026-06-30T00:00"),
        ("0 0 31 1-12 *", "2026-05-31T00:00", "2026-07-31T00:00"),
        ("0 0 29 2 *", "2028-02-29T00:00", "2032-02-29T00:00"),  # leap years only
        ("0 0 31 2 mon", "2027-02-01T00:00", "2027-02-08T00:00"),  # day or weekday: Mondays
        ("0 0 L 2 *", "2027-02-28T00:00", "2028-02-29T00:00"),
        ("0 0 31W 2 *", "2027-02-26T00:00", "2028-02-29T00:00"),
        ("*/10 * * * * *", "2026-05-01T00:00:10", "2026-05-01T00:00:20"),
        ("0 0 1 1 * *", "2026-05-01T01:00", "2026-06-01T01:00"),  # seconds first: 01:00 on the 1st
        ("59 59 23 31 12 *", "2026-12-31T23:59:59", "2027-12-31T23:59:59"),
        ("@daily", "2026-05-02T00:00", "2026-05-03T00:00"),
    ],
)
def test_the_forms_croniter_accepts_keep_working(expression, first, second):
    cron = Cron(expression)
    due = cron.next_after(datetime.datetime(2026, 5, 1, tzinfo=UTC))
    assert (due, cron.next_after(due)) == (
        datetime.datetime.fromisoformat(first).replace(tzinfo=UTC),
        datetime.datetime.fromisoformat(second).replace(tzinfo=UTC),
    )
