"""Option types and options the management commands share."""

import argparse
import re

from django.core.management.base import CommandError

from django_dbjobs.enqueuing import validation
from django_dbjobs.exceptions import DbJobsError

#: Units of a duration: 90s, 30m, 12h, 7d, 2w.
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError(value)
    return number


def port_number(value: str) -> int:
    """A TCP port, 0 (any free port, logged) to 65535."""
    number = int(value)
    if not 0 <= number <= 65535:
        raise ValueError(value)
    return number


def seconds(value: str) -> float:
    """A number of seconds, 0 or more."""
    number = float(value)
    if number < 0:
        raise ValueError(value)
    return number


def duration(value: str) -> float:
    """Seconds from '3600', '90s', '30m', '12h', '7d' or '2w'."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", value)
    if not match:
        raise ValueError(value)
    return float(match[1]) * DURATION_UNITS[match[2] or "s"]


def add_queues_option(parser, help_text: str) -> None:
    """``--queues a,b`` into options["queues"]; read it with queue_names().

    Repeatable, and ``--queue NAME`` (the old spelling of two commands) still works.
    """
    parser.add_argument("--queues", action="append", default=[], metavar="A,B", help=help_text)
    parser.add_argument("--queue", action="append", dest="queues", help=argparse.SUPPRESS)


def queue_names(given) -> list[str]:
    """The queue names of ``--queues`` ('a,b', repeated, or call_command's string or list), in order, once."""
    if isinstance(given, str):
        given = [given]
    names = (name.strip() for value in given or [] for name in value.split(","))
    return list(dict.fromkeys(name for name in names if name))


def checked_queue_names(given) -> list[str]:
    """queue_names(given), each a well-formed queue name (declared or not); else a CommandError."""
    queues = queue_names(given)
    try:
        for name in queues:
            validation.queue_name(name)
    except DbJobsError as exc:
        raise CommandError(str(exc)) from exc
    return queues


def add_database_option(parser) -> None:
    """``--database ALIAS``; None means the alias the router picks for jobs."""
    parser.add_argument(
        "--database", default=None, help="Database alias (default: the one the router picks for jobs)."
    )
