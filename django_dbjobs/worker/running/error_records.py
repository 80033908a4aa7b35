"""The stored record of a failed attempt, safe to write to any database."""

from __future__ import annotations

import datetime
import traceback
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ...models import Job

MAX_SUMMARY_CHARS = 1000
MAX_TRACEBACK_CHARS = 64_000

#: Modules between the worker and a job's own code (an async job's event loop included).
_RUNNER_MODULES = ("django_dbjobs.", "asgiref.", "asyncio.", "concurrent.futures.")


def error_record(exc: BaseException, job: Job, worker: str, summary: str | None = None) -> dict:
    """The stored record of one failed attempt; text is made safe for any database.

    Survives exceptions that misbehave: a ``__str__`` that raises, a traceback that
    cannot be formatted.
    """
    cls = type(exc)
    if summary is None:
        message = _safe(lambda: str(exc), "<the exception's message could not be read>")
        summary = f"{cls.__name__}: {message}" if message else cls.__name__
    trace = _safe(
        lambda: "".join(traceback.format_exception(exc)),
        f"{cls.__name__} (the traceback could not be formatted)",
    )
    return {
        "exception_class_path": f"{cls.__module__}.{cls.__qualname__}",
        "traceback": clean_text(trace)[-MAX_TRACEBACK_CHARS:],
        "summary": clean_text(summary)[:MAX_SUMMARY_CHARS],
        "attempt": job.attempts,
        "worker": worker,
        "at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
    }


def unstorable_error(exc: BaseException, job: Job, worker: str, by_database: bool) -> dict:
    """The record of a run whose return value the database refused, or the worker's checks did.

    A value that is not JSON data is recorded as the TypeError it is, as Django's task
    backends record it; anything else as an UnstorableResult saying who refused it.
    """
    if type(exc) is TypeError and not by_database:
        return error_record(exc, job, worker)
    message = _safe(lambda: str(exc), type(exc).__name__)
    reason = "the database refused its return value" if by_database else "its return value cannot be stored"
    return error_record(exc, job, worker, summary=f"UnstorableResult: the job ran, but {reason}: {message}")


def without_worker_frames(exc: BaseException) -> BaseException:
    """Cut the worker's frames from the top of `exc`'s traceback, so that it starts in the job's code.

    Logged and stored, a job's traceback then reads as it would had the job been called
    directly; a failure raised before the job's code ran (its arguments did not fit) keeps
    no frame at all.
    """
    try:
        frames = exc.__traceback__
        while frames is not None and _is_runner(frames.tb_frame):
            frames = frames.tb_next
        return exc.with_traceback(frames)
    except Exception:  # noqa: BLE001 - an exception that misbehaves is recorded as it is
        return exc


def _is_runner(frame) -> bool:
    return frame.f_globals.get("__name__", "").startswith(_RUNNER_MODULES)


def clean_text(text: str) -> str:
    """Replace what some databases cannot store: NUL, and unpaired surrogates."""
    return str.replace(str(text), "\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


def _safe(make, fallback: str) -> str:
    try:
        return str(make())
    except Exception:  # noqa: BLE001 - user code (an exception's __str__) may raise anything
        return fallback
