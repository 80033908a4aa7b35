"""Check everything enqueue() is given before any SQL runs (DESIGN.md promise 10)."""

from __future__ import annotations

import datetime
import json
import math
from typing import Any

from django.utils import timezone

from ..conf import settings
from ..exceptions import InvalidJob, InvalidJobArguments, PayloadTooLarge
from ..models.job import MAX_PRIORITY, MIN_PRIORITY
from ..models.json_values import article, json_value, short, text  # noqa: F401 - json_value re-exported
from ..models.queue import QUEUE_NAME, queue_name  # noqa: F401 - the rule lives with the model


def return_value(value: Any, reject_nul: bool) -> Any:
    """A job's return value as JSON data the database can store; odd characters replaced.

    Raises TypeError, the error Django's task backends record, for a value that is not JSON data.
    """
    try:
        return json_value(value, "its return value", reject_nul, clean=True)
    except InvalidJobArguments as exc:
        raise TypeError(f"The job ran, but {exc}") from None


def return_value_size(value: Any) -> None:
    """Refuse a return value larger than DBJOBS_MAX_PAYLOAD_BYTES as JSON.

    An oversized value can break the connection on MySQL (max_allowed_packet) and
    then look like an outage, retried for ever; numbers and None are never large.
    """
    if value is None or isinstance(value, bool | int | float):
        return
    limit = settings.MAX_PAYLOAD_BYTES
    if isinstance(value, str) and len(value) * 4 < limit:
        return
    size = len(json.dumps(value, separators=(",", ":")).encode())
    if size > limit:
        raise PayloadTooLarge(
            f"The return value takes {size} bytes as JSON, more than DBJOBS_MAX_PAYLOAD_BYTES ({limit})."
        )


def payload(args: tuple | list, kwargs: dict, reject_nul: bool) -> tuple[list, dict]:
    """Validate and normalise a job's arguments; enforce DBJOBS_MAX_PAYLOAD_BYTES."""
    if not isinstance(kwargs, dict):
        raise InvalidJobArguments(f"kwargs must be a dict, not {article(type(kwargs).__name__)}.")
    clean_args = [json_value(a, f"args[{i}]", reject_nul) for i, a in enumerate(args)]
    clean_kwargs = {}
    for key, value in kwargs.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise InvalidJobArguments(f"kwargs key {short(key)} is not a valid argument name.")
        clean_kwargs[key] = json_value(value, f"kwargs[{key!r}]", reject_nul)
    _check_size(len(_COMPACT.encode([clean_args, clean_kwargs]).encode()))
    return clean_args, clean_kwargs


def positional_payload(args: tuple | list, reject_nul: bool) -> tuple[list, str]:
    """payload() for positional arguments only: the clean list and its JSON text, made once.

    The text is what is stored (enqueue_many() sends it as it is), written as json.dumps()
    writes it, as save() stores a JSONField; the size checked is payload()'s: ``[args,{}]``
    as compact JSON.
    """
    if not args:
        _check_size(7)  # [[],{}]
        return [], "[]"
    parts = _scalars_json(args, unchecked=True, reject_nul=reject_nul)  # the usual arguments
    if parts is not None:
        clean_args = list(args)
    else:
        clean_args = [json_value(a, f"args[{i}]", reject_nul) for i, a in enumerate(args)]
        parts = _scalars_json(clean_args)
    if parts is None:
        text, compact = json.dumps(clean_args), len(_COMPACT.encode(clean_args))
    else:
        text = f"[{', '.join(parts)}]"
        compact = len(text) - (len(parts) - 1)  # ", " between items against ","
    _check_size(compact + 5)  # ensure_ascii: one byte per character
    return clean_args, text


def _scalars_json(values, unchecked: bool = False, reject_nul: bool = False) -> list[str] | None:
    """Each of a list of strings, integers and None (the usual job arguments) as JSON, as
    the json module writes it, without making an encoder for each list; None for anything else.

    With `unchecked` (values json_value() has not seen), text must also be ASCII without a
    NUL the database rejects: anything else is left to json_value() (None).
    """
    parts = []
    for value in values:
        kind = type(value)
        if kind is str:
            if unchecked and (not value.isascii() or (reject_nul and "\x00" in value)):
                return None
            parts.append(_encode_string(value))
        elif kind is int:
            parts.append(int.__repr__(value))
        elif value is None:
            parts.append("null")
        else:
            return None
    return parts


#: json.dumps(..., separators=(",", ":")) makes a new encoder on every call; this is made once.
_COMPACT = json.JSONEncoder(separators=(",", ":"))
_encode_string = json.encoder.encode_basestring_ascii  # what the encoder uses (ensure_ascii)


def _check_size(size: int) -> None:
    limit = settings.MAX_PAYLOAD_BYTES
    if size > limit:
        raise PayloadTooLarge(
            f"The job's arguments take {size} bytes as JSON, more than "
            f"DBJOBS_MAX_PAYLOAD_BYTES ({limit}). Store large data elsewhere and pass its id."
        )


def queue(name: Any) -> str:
    """A queue jobs may be enqueued on: well-formed, and in DBJOBS_QUEUES when that is set."""
    queue_name(name)
    allowed = settings.QUEUES
    if allowed is not None and name not in allowed:
        raise InvalidJob(f"queue {name!r} is not one of DBJOBS_QUEUES ({', '.join(allowed)}).")
    return str.__str__(name)  # a plain str: a str enum member's str() is its name, not its value


def priority(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidJob(f"priority must be an integer, not {value!r}.")
    if not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise InvalidJob(f"priority must be between {MIN_PRIORITY} and {MAX_PRIORITY}, not {value}.")
    return int.__int__(value)  # a plain int, the one checked (an IntEnum member included)


def max_attempts(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidJob(f"max_attempts must be a positive integer, not {value!r}.")
    return int.__int__(value)


def run_at(when: Any, delay: Any) -> datetime.datetime | None:
    """Return the aware datetime a job becomes due, or None for "now"."""
    if when is not None and delay is not None:
        raise InvalidJob("Pass run_at or delay, not both.")
    if delay is not None:
        if isinstance(delay, datetime.timedelta):
            seconds = delay.total_seconds()
        elif isinstance(delay, int | float) and not isinstance(delay, bool):
            seconds = float(delay)
        else:
            raise InvalidJob(f"delay must be a timedelta or a number of seconds, not {delay!r}.")
        if not math.isfinite(seconds) or seconds < 0:
            raise InvalidJob(f"delay must be zero or more seconds, not {delay!r}.")
        return timezone.now() + datetime.timedelta(seconds=seconds)
    if when is None:
        return None
    if not isinstance(when, datetime.datetime):
        raise InvalidJob(f"run_at must be a datetime, not {when!r}.")
    if timezone.is_naive(when):
        raise InvalidJob(
            f"run_at must be timezone-aware, not the naive {when!r}. "
            "Use django.utils.timezone.now() + timedelta(...), or attach a tzinfo."
        )
    return when


def unique_key(key: Any, reject_nul: bool) -> str:
    if not isinstance(key, str) or not 1 <= len(key) <= 200:
        raise InvalidJob(f"unique_key must be a string of 1 to 200 characters, not {key!r}.")
    try:
        return text(key, "unique_key", reject_nul, clean=False)
    except InvalidJobArguments as exc:
        raise InvalidJob(str(exc)) from None
