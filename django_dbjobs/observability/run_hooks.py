"""What watches a job's run in a worker: wrappers around the run, listeners of each stored outcome.

Tracing and metrics register here when they are turned on; with nothing registered, a
run pays one empty-list check for each. A hook is our code around the user's (an
exporter, a metrics library): whatever it raises is logged and never costs the job its
run or its outcome.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from . import log_fields

if TYPE_CHECKING:
    from ..models import Job

logger = logging.getLogger("django_dbjobs")

#: Called with a job about to run; the context manager it returns is entered before the
#: job's code and left once its outcome is stored or handed on, in the job's own context.
RunWrapper = Callable[["Job"], AbstractContextManager[Any]]
#: Called with (job, status stored, the attempt's exception or None) for each stored outcome;
#: also for those the orphan sweep stores for a dead worker's job (worker/leases/sweep.py),
#: in the sweeping worker, outside any wrapper (the job's `queue` and `name` are loaded).
OutcomeListener = Callable[["Job", str, "BaseException | None"], None]

_wrappers: list[RunWrapper] = []
_listeners: list[OutcomeListener] = []
_NOTHING = contextlib.nullcontext()


def add_wrapper(wrapper: RunWrapper) -> None:
    """Wrap every run from now on in `wrapper(job)` (once, however often added)."""
    if wrapper not in _wrappers:
        _wrappers.append(wrapper)


def add_listener(listener: OutcomeListener) -> None:
    """Tell `listener` every stored outcome from now on (once, however often added)."""
    if listener not in _listeners:
        _listeners.append(listener)


def remove(hook: RunWrapper | OutcomeListener) -> None:
    """Stop calling `hook` (a wrapper or a listener); nothing if it was not added."""
    for hooks in (_wrappers, _listeners):
        if hook in hooks:
            hooks.remove(hook)  # type: ignore[arg-type]


def wrapping(job: Job) -> AbstractContextManager[Any]:
    """The context manager a worker runs `job` in: every wrapper's, each guarded."""
    if not _wrappers:
        return _NOTHING
    return _guarded(job, list(_wrappers))


@contextlib.contextmanager
def _guarded(job: Job, wrappers: list[RunWrapper]) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for wrapper in wrappers:
            try:
                entered = wrapper(job)
                entered.__enter__()
            except Exception:  # noqa: BLE001 - a hook that fails never costs the job its run
                logger.exception(
                    "A run hook failed at the start of job id=%s: %r",
                    job.pk,
                    wrapper,
                    extra=log_fields.for_job(job),
                )
                continue
            stack.push(_exit_guarded(job, entered))
        yield


def _exit_guarded(job: Job, entered: AbstractContextManager[Any]) -> Callable[..., bool]:
    def leave(*exc_info: Any) -> bool:
        try:
            entered.__exit__(*exc_info)
        except Exception:  # noqa: BLE001
            logger.exception(
                "A run hook failed at the end of job id=%s: %r",
                job.pk,
                entered,
                extra=log_fields.for_job(job),
            )
        return False  # never swallows what the run raised

    return leave


def outcome(job: Job, status: str, failure: BaseException | None) -> None:
    """Tell every listener that `job`'s outcome `status` was stored."""
    for listener in _listeners:
        try:
            listener(job, status, failure)
        except Exception:  # noqa: BLE001 - a hook that fails never costs the job its outcome
            logger.exception(
                "An outcome hook failed for job id=%s: %r", job.pk, listener, extra=log_fields.for_job(job)
            )
