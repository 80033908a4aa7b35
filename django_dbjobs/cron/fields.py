"""Cron errors in sentences: which field is wrong and why, or why an expression never matches. No database.

croniter decides what is valid; this module only explains. A field is blamed when
croniter refuses it alone (every other field ``*``), so an expression croniter reads is
never refused here, whatever its version accepts.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, field

from croniter import croniter

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_MONTHS_IN_FULL = tuple(
    "January February March April May June July August September October November December".split()
)
# Each month's longest length: February has 29 days in a leap year.
_LONGEST_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
# croniter's R draws a random value each time an expression is read: every worker, and
# every due time, would pick another. Matches R on its own, not the r of "mar" or "apr".
_RANDOM = re.compile(r"(?<![a-z])r(?![a-z])", re.IGNORECASE)
_HASHED = re.compile(r"h(\(\d+-\d+\))?(/\d+)?", re.IGNORECASE)
_NUMBER = re.compile(r"[0-9]+")
_NAME = re.compile(r"[a-z]+", re.IGNORECASE)
_LAST_WEEKDAY = re.compile(r"l[0-9]+", re.IGNORECASE)
_NEAREST_WEEKDAY = re.compile(r"([0-9]+)w|w([0-9]+)", re.IGNORECASE)
_FORMS = "written as a number, a range such as 1-5, a list such as 1,5 or a step such as */5"


@dataclass(frozen=True)
class Field:
    """One field of a cron expression: its name, its values and the sentence that says them."""

    name: str
    low: int
    high: int
    rule: str
    names: tuple[str, ...] = field(default=(), repr=False)
    value_kind: str = "a number"

    def is_a(self, value: str) -> bool:
        """Whether `value` (a number or a name) is one of this field's values."""
        if _NUMBER.fullmatch(value):
            return self.low <= int(value) <= self.high
        return value.lower() in self.names


SECOND = Field("second", 0, 59, "seconds run from 0 to 59")
MINUTE = Field("minute", 0, 59, "minutes run from 0 to 59")
HOUR = Field("hour", 0, 23, "hours run from 0 to 23")
DAY = Field("day-of-month", 1, 31, "days of the month run from 1 to 31")
MONTH = Field("month", 1, 12, "months run from 1 to 12, or JAN to DEC", MONTHS, "a month")
WEEKDAY = Field(
    "day-of-week",
    0,
    7,
    "days of the week run from 0 to 7 (0 and 7 are Sunday), or SUN to SAT",
    WEEKDAYS,
    "a day of the week",
)


def _fields(count: int) -> tuple[Field, ...]:
    """The fields of an expression with `count` fields: 5, or 6 with seconds first."""
    return ((SECOND,) if count == 6 else ()) + (MINUTE, HOUR, DAY, MONTH, WEEKDAY)


def problems(expression: str) -> list[str]:
    """A sentence for each field of a 5- or 6-field expression that cannot be used; empty if none."""
    texts = expression.split()
    seconds = len(texts) == 6
    readable = _readable(expression, seconds)
    subject = f"the cron expression {expression!r}"
    found = []
    for index, (cron_field, text) in enumerate(zip(_fields(len(texts)), texts, strict=True)):
        where = f"Its {cron_field.name} field" if found else f"The {cron_field.name} field of {subject}"
        if _RANDOM.search(text):
            found.append(
                f"{where} uses R (a random value), which each worker would draw differently; "
                f"write the value: {cron_field.rule}."
            )
        elif not readable and not _readable(_alone(text, index, len(texts)), seconds):
            found.append(f"{where} {_explain(cron_field, text)}")
    if not readable and not found:
        # Every field reads alone: croniter split the expression elsewhere than Python did.
        found.append(
            f"The cron expression {expression!r} cannot be read; separate its fields with plain spaces."
        )
    return found


def never_matches(expression: str) -> str:
    """Why an expression croniter reads never matches, in a sentence."""
    reason = _missing_days(expression) or "no date fits all of its fields together"
    return f"The cron expression {expression!r} never matches: {reason}."


def _alone(text: str, index: int, count: int) -> str:
    """An expression of `count` fields with `text` at `index` and ``*`` everywhere else."""
    return " ".join(["*"] * index + [text] + ["*"] * (count - index - 1))


def _readable(expression: str, seconds: bool) -> bool:
    try:
        croniter(expression, datetime.datetime(2000, 1, 1), second_at_beginning=seconds)
    except Exception:  # noqa: BLE001 - croniter raises several kinds
        return False
    return True


def _explain(cron_field: Field, text: str) -> str:
    """What is wrong with a field croniter refuses: "is 61; minutes run from 0 to 59." and the like."""
    problem = _field_problem(cron_field, text)
    if problem is None:
        return f"is {text}, which cron cannot read; {cron_field.rule}, {_FORMS}."
    part, reason = problem
    return f"{'is' if part == text else 'has'} {part}{reason}"


def _field_problem(cron_field: Field, text: str) -> tuple[str, str] | None:
    """The part of a field at fault and the rest of the sentence, or None when nothing is recognised."""
    if "?" in text:
        if cron_field not in (DAY, WEEKDAY):
            return text, "; ? (no specific value) is allowed only in the day-of-month and day-of-week fields."
        return text, "; ? stands alone in its field."
    items = text.split(",")
    if "" in items:
        return text, ", a list with an empty item; separate the values with single commas, as in 1,5."
    for item in items:
        problem = _item_problem(cron_field, item, len(items))
        if problem is not None:
            return problem
    nth = [bool("#" in item or _LAST_WEEKDAY.fullmatch(item)) for item in items]
    if cron_field is WEEKDAY and any(nth) and not all(nth):
        return text, (
            ", which mixes plain days with days of a given week (# or L); "
            "write one kind or the other, as in FRI#2,FRI#4."
        )
    return None


def _item_problem(cron_field: Field, item: str, items: int) -> tuple[str, str] | None:
    if _HASHED.fullmatch(item):
        return (
            item,
            f", a hashed value, which django-dbjobs does not support; write the value: {cron_field.rule}.",
        )
    base, _, step = item.partition("/")
    if step and not (_NUMBER.fullmatch(step) and int(step) > 0):
        return item, "; a step must be a whole number of 1 or more, as in */5."
    if cron_field is DAY and (nearest := _NEAREST_WEEKDAY.fullmatch(base)):
        if not cron_field.is_a(nearest.group(1) or nearest.group(2)):
            return item, f"; {cron_field.rule}."
        if items > 1:
            return item, "; W (the nearest weekday) takes a single day, not a list, as in 15W."
        return None
    if cron_field is WEEKDAY and "#" in base:
        base, _, week = base.partition("#")
        if not (_NUMBER.fullmatch(week) and 1 <= int(week) <= 5):
            return item, "; the number after # is the week of the month, from 1 to 5, as in FRI#2."
    elif cron_field is WEEKDAY and _LAST_WEEKDAY.fullmatch(base):
        base = base[1:]  # L5: the last Friday of the month
    for value in base.split("-") if base != "*" else ():
        if cron_field is DAY and value.lower() == "l":
            continue  # L: the last day of the month
        if _NUMBER.fullmatch(value) and not cron_field.is_a(value):
            return value, f"; {cron_field.rule}."
        if _NAME.fullmatch(value) and not cron_field.is_a(value):
            return value, f", which is not {cron_field.value_kind}; {cron_field.rule}."
    return None


def _missing_days(expression: str) -> str | None:
    """Which months lack which days ("February has no day 31"), when no month has any day asked for."""
    texts = expression.split()
    if len(texts) not in (5, 6) or not re.fullmatch(r"[0-9*,/-]+", texts[-3]) or texts[-1] not in ("*", "?"):
        return None  # L and W days always fall in a month; with weekdays, either one matches
    try:
        parsed = croniter(expression, datetime.datetime(2000, 1, 1), second_at_beginning=len(texts) == 6)
    except Exception:  # noqa: BLE001 - explained by problems() instead
        return None
    days, months = parsed.expanded[2], parsed.expanded[3]
    months = range(1, 13) if months == ["*"] else months
    if days == ["*"] or not all(isinstance(value, int) for value in [*days, *months]):
        return None
    if any(day <= _LONGEST_MONTH[month - 1] for day in days for month in months):
        return None
    names = [_MONTHS_IN_FULL[month - 1] for month in sorted(months)]
    have = "has" if len(names) == 1 else "have"
    return f"{_joined(names, 'and')} {have} no day {_joined([str(day) for day in sorted(days)], 'or')}"


def _joined(words: list[str], conjunction: str) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} {conjunction} {words[-1]}"
