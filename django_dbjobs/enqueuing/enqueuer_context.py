"""The enqueuer's context: captured with a job at enqueue, restored while it runs.

A job runs far from the request that enqueued it. What that request had active (its
language, its timezone, and whatever DBJOBS_CONTEXT_CAPTURE returns: a request id, a
tenant, the acting user's id) is stored with the job in its ``context`` column, and put
back around the job's run and the recording and signalling of its outcome, so emails
render in the user's language and logs carry the request id that caused the job.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings as django_settings
from django.utils import timezone, translation
from django.utils.module_loading import import_string

from ..conf import settings
from ..exceptions import InvalidJobContext

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
        zone = timezone.get_current_timezone()
        if zone is not timezone.get_default_timezone():  # zoneinfo caches: one object per name
            name = getattr(zone, "key", None) or timezone.get_current_timezone_name()
            if name != timezone.get_default_timezone_name():
                context["timezone"] = name
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


class restoring_safely:  # noqa: N801 - used like a function: ``with restoring_safely(ctx) as error``
    """Put an enqueuer's context back for the duration of the block; ``as`` gives the error
    that kept it from being restored (None if it was).

    Only what was stored is put back: the worker runs each job in a fresh copy of its
    thread's context (execution.run()), so what a previous job activated never leaks into
    the next. What DBJOBS_CONTEXT_RESTORE raises on entry, SystemExit included, is handed
    back to fail the attempt (rather than running without, say, its tenant); an error on
    leaving is logged. A job with no stored context costs one settings read.
    """

    __slots__ = ("context", "_undo")

    def __init__(self, context: dict[str, Any] | None):
        self.context = context or {}
        self._undo: list = []

    def __enter__(self) -> BaseException | None:
        try:
            self._restore()
        except BaseException as exc:  # noqa: BLE001 - user code (SystemExit too): the attempt's failure
            self._unwind()
            return exc
        return None

    def __exit__(self, *exc_info) -> None:
        self._unwind()

    def _restore(self) -> None:
        context = self.context
        if not context and not settings.CONTEXT_RESTORE:
            return  # the common case: nothing stored, nothing to put back
        language = context.get("language")
        if language and django_settings.USE_I18N:
            self._enter(translation.override(language))
        zone = context.get("timezone")
        if zone and django_settings.USE_TZ:
            self._enter(timezone.override(zone))
        if settings.CONTEXT_RESTORE:
            restore = _hook(settings.CONTEXT_RESTORE)(context.get("data") or {})
            if not (hasattr(restore, "__enter__") and hasattr(restore, "__exit__")):
                raise TypeError(
                    f"DBJOBS_CONTEXT_RESTORE must return a context manager, not {type(restore).__name__}."
                )
            restore.__enter__()
            self._undo.append(_LoggedExit(restore))

    def _enter(self, manager) -> None:
        manager.__enter__()
        self._undo.append(manager)

    def _unwind(self) -> None:
        while self._undo:
            self._undo.pop().__exit__(None, None, None)


class _LoggedExit:
    """Leave a user's context manager; what it raises is logged, never raised."""

    __slots__ = ("manager",)

    def __init__(self, manager):
        self.manager = manager

    def __exit__(self, *exc_info) -> None:
        try:
            self.manager.__exit__(None, None, None)
        except Exception:  # noqa: BLE001 - user code: the job's outcome stands
            logger.exception("DBJOBS_CONTEXT_RESTORE raised on leaving; the job's outcome stands")


def _hook(path: str) -> Callable:
    hook = _hooks.get(path)
    if hook is None:
        hook = _hooks[path] = import_string(path)
    return hook
