"""A job's concurrency key and limit: from @job's template or function, or given at enqueue."""

from __future__ import annotations

import difflib
import inspect
import re
import string
from collections.abc import Callable
from typing import Any

from ..exceptions import InvalidJob
from ..models.job import MAX_CONCURRENCY_KEY, MAX_CONCURRENCY_LIMIT

#: The limit of a key given without one: its jobs run one at a time.
DEFAULT_LIMIT = 1

KeySpec = str | Callable[..., Any]


def check_spec(key: Any, limit: Any) -> None:
    """Refuse a @job/@task concurrency_key that is neither text nor a function, and a bad limit."""
    if key is not None and not (isinstance(key, str) or callable(key)):
        raise InvalidJob(f"concurrency_key must be a string, a template or a function, not {key!r}.")
    if limit is not None:
        check_limit(limit)
    if limit is not None and key is None:
        raise InvalidJob("concurrency_limit needs a concurrency_key: the jobs it limits share a key.")


def check_template(func: Callable, template: str) -> None:
    """Refuse a concurrency_key template naming a parameter `func` lacks, at @job time, not at enqueue.

    Positional fields (``{0}``) are left to enqueue: an argument given by name has no position.
    """
    try:
        fields = [field for _, field, _, _ in string.Formatter().parse(template) if field]
    except ValueError as exc:
        raise InvalidJob(f"concurrency_key template {template!r} is malformed: {exc}.") from None
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return  # a callable inspect cannot read: enqueue formats it, or says why not
    parameters = signature.parameters
    if any(parameter.kind is parameter.VAR_KEYWORD for parameter in parameters.values()):
        return  # any name may come in **kwargs
    for field in fields:
        name = re.split(r"[.\[]", field, maxsplit=1)[0]  # {account.id}, {ids[0]}: the parameter
        if name.isdigit() or name in parameters:
            continue
        close = difflib.get_close_matches(name, list(parameters), n=1)
        raise InvalidJob(
            f"concurrency_key template {template!r} names {name!r}, which is not a parameter of "
            f"{getattr(func, '__qualname__', func)}{signature}."
            + (f" Did you mean {{{close[0]}}}?" if close else "")
        )


def check_limit(limit: Any) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_CONCURRENCY_LIMIT:
        raise InvalidJob(
            f"concurrency_limit must be an integer from 1 to {MAX_CONCURRENCY_LIMIT}, not {limit!r}."
        )
    return int.__int__(limit)


def resolve(
    func: Callable | None,
    spec: KeySpec | None,
    given: Any,
    limit: Any,
    default_limit: int | None,
    args: list | tuple,
    kwargs: dict,
) -> tuple[str | None, int | None]:
    """The (key, limit) of a job about to be enqueued; (None, None) when it has no key.

    `given` (enqueue(concurrency_key=...)) is the key itself; else `spec`, the job's:
    a template formatted with the job's arguments by parameter name
    (``"sync:{account_id}"``), or a function called with the arguments.
    """
    if given is not None:
        key = given
    elif spec is None:
        if limit is not None:
            raise InvalidJob("concurrency_limit needs a concurrency_key: the jobs it limits share a key.")
        return None, None
    elif isinstance(spec, str):
        key = _format(func, spec, args, kwargs)
    else:
        try:
            key = spec(*args, **kwargs)
        except Exception as exc:
            raise InvalidJob(f"The concurrency_key function raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_CONCURRENCY_KEY or "\x00" in key:
        raise InvalidJob(
            f"concurrency_key must be a string of 1 to {MAX_CONCURRENCY_KEY} characters "
            f"without NUL, not {key!r}."
        )
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidJob(
            "concurrency_key contains a lone surrogate (an unpaired U+D800-U+DFFF code point), "
            "which no database stores."
        ) from None
    chosen = limit if limit is not None else default_limit
    return key, DEFAULT_LIMIT if chosen is None else check_limit(chosen)


def _format(func: Callable | None, template: str, args, kwargs) -> str:
    """`template` with the job's arguments put in: by parameter name, or by position ({0})."""
    named = dict(kwargs)
    # A Task that takes its context has it as its first parameter, given by the worker.
    for given in (args, (None, *args)):
        try:
            bound = inspect.signature(func).bind(*given, **kwargs)
        except (TypeError, ValueError):
            continue
        bound.apply_defaults()
        named = dict(bound.arguments)
        break
    try:
        return template.format(*args, **named)
    except (KeyError, IndexError, AttributeError, ValueError) as exc:
        raise InvalidJob(
            f"concurrency_key template {template!r} does not fit the job's arguments: "
            f"{type(exc).__name__}: {exc}"
        ) from None
