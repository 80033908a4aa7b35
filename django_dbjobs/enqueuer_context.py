"""The enqueuer's context: captured with a job at enqueue, restored while it runs.

A job runs far from the request that enqueued it. What that request had active (its
language, its timezone, and whatever DBJOBS_CONTEXT_CAPTURE returns: a request id, a
tenant, the acting user's id) is stored with the job in its ``context`` column, and put
back around the job's run and the recording and signalling of its outcome, so emails
render in the user's language and logs carry the request id that caused the job.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

from django.conf import settings as django_settings
from django.utils import timezone, translation
from django.utils.module_loading import import_string

from .conf import settings
from .exceptions import InvalidJobContext

logger = logging.getLogger("django_dbjobs")

#: Largest captured context, in bytes of JSON: it travels with every job.
MAX_CONTEXT_BYTES = 4096

_hooks: dict[str, Callable] = {}


def capture() -> dict[str, Any] | None:
    """The context of the code enqueueing now, or None when it is all the defaults.

    Raises InvalidJobContext when DBJOBS_CONTEXT_CAPTURE returns something that is not
    a JSON object of at most MAX_CONTEXT_BYTES.
    """
    context: dict[str, Any] = {}
    if django_settings.USE_I18N:
        language = translation.get_language()
        if language and language != django_settings.LANGUAGE_CODE:
            context["language"] = language
    if django_settings.USE_TZ:
        zone = timezone.get_current_timezone_name()
        if zone != timezone.get_default_timezone_name():
            context["timezone"] = zone
    if settings.CONTEXT_CAPTURE:
        data = _hook(settings.CONTEXT_CAPTURE)()
        if data is not None:
            context["data"] = _checked(data)
    return context or None


def _checked(data: Any) -> dict:
    if not isinstance(data, dict):
        raise InvalidJobContext(
            f"DBJOBS_CONTEXT_CAPTURE must return a dict or None, not {type(data).__name__}."
        )
    try:
        text = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidJobContext(f"DBJOBS_CONTEXT_CAPTURE returned data that is not JSON: {exc}.") from None
    if len(text.encode()) > MAX_CONTEXT_BYTES:
        raise InvalidJobContext(
            f"DBJOBS_CONTEXT_CAPTURE returned {len(text.encode())} bytes of JSON; the limit is "
            f"{MAX_CONTEXT_BYTES}. Store ids, not objects."
        )
    return json.loads(text)  # what the job will see: tuples become lists, keys strings


@contextlib.contextmanager
def restoring(context: dict[str, Any] | None) -> Iterator[None]:
    """Put an enqueuer's context back for the duration of the block.

    Raises what DBJOBS_CONTEXT_RESTORE raises on entry (the job's attempt then fails
    rather than running without, say, its tenant); an error on leaving is logged.
    """
    if not context and not settings.CONTEXT_RESTORE:
        yield
        return
    context = context or {}
    with contextlib.ExitStack() as stack:
        if "language" in context and django_settings.USE_I18N:
            stack.enter_context(translation.override(context["language"]))
        if "timezone" in context and django_settings.USE_TZ:
            stack.enter_context(timezone.override(context["timezone"]))
        if settings.CONTEXT_RESTORE:
            restore = _hook(settings.CONTEXT_RESTORE)(context.get("data") or {})
            stack.enter_context(_logged_exit(restore))
        yield


@contextlib.contextmanager
def restoring_safely(context: dict[str, Any] | None) -> Iterator[BaseException | None]:
    """restoring(), yielding the error that kept the context from being restored, or None."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(restoring(context))
        except Exception as exc:  # noqa: BLE001 - user code: it becomes the attempt's failure
            yield exc
            return
        yield None


@contextlib.contextmanager
def _logged_exit(manager) -> Iterator[None]:
    manager.__enter__()
    try:
        yield
    finally:
        try:
            manager.__exit__(None, None, None)
        except Exception:  # noqa: BLE001 - user code: the job's outcome stands
            logger.exception("DBJOBS_CONTEXT_RESTORE raised on leaving; the job's outcome stands")


def _hook(path: str) -> Callable:
    hook = _hooks.get(path)
    if hook is None:
        hook = _hooks[path] = import_string(path)
    return hook
