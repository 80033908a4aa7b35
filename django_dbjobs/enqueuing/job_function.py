"""JobFunction and @job: a function registered as a job, which users call or enqueue."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, overload

from ..exceptions import InvalidJob
from ..flow import keys
from ..registry import add
from ..registry.registered import JobOptions, RegisteredJob
from .api import aenqueue, enqueue
from .bulk import enqueue_many

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing's from Python 3.11

    from ..models import Job
    from .spec import EnqueueManyOptions, EnqueueOptions


class JobFunction(RegisteredJob):
    """A registered job: call it to run it now, or `.enqueue(...)` to run it later."""

    def enqueue(
        self, *args: Any, kwargs: dict[str, Any] | None = None, **options: Unpack[EnqueueOptions]
    ) -> Job:
        """Enqueue this job; see django_dbjobs.enqueue() for the options."""
        return enqueue(self, *args, kwargs=kwargs, **options)

    def enqueue_many(
        self,
        arguments: Iterable[tuple | list],
        *,
        batch_size: int = 1000,
        **options: Unpack[EnqueueManyOptions],
    ) -> list[Job]:
        """Enqueue this job once per tuple of positional arguments; see django_dbjobs.enqueue_many()."""
        return enqueue_many(self, arguments, batch_size=batch_size, **options)

    async def aenqueue(
        self, *args: Any, kwargs: dict[str, Any] | None = None, **options: Unpack[EnqueueOptions]
    ) -> Job:
        """Enqueue this job from async code; see django_dbjobs.aenqueue()."""
        return await aenqueue(self, *args, kwargs=kwargs, **options)


@overload
def job(func: Callable[..., Any], /) -> JobFunction: ...


@overload
def job(
    func: None = None,
    /,
    *,
    name: str | None = None,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    backoff: float | None = None,
    timeout: float | None = None,
    concurrency_key: str | Callable[..., str] | None = None,
    concurrency_limit: int | None = None,
    interruptible: bool = True,
) -> Callable[[Callable[..., Any]], JobFunction]: ...


def job(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    backoff: float | None = None,
    timeout: float | None = None,
    concurrency_key: str | Callable[..., str] | None = None,
    concurrency_limit: int | None = None,
    interruptible: bool = True,
) -> JobFunction | Callable[[Callable[..., Any]], JobFunction]:
    """Register a module-level function as a job, with default enqueue options.

    Use as ``@job`` or ``@job(queue="emails", max_attempts=5, timeout=60)``. The job's name
    is its dotted path (``module.function``) unless ``name`` is given.

    ``concurrency_key`` (a template such as ``"sync:{account_id}"``, formatted with the
    job's arguments, or a function of them) with ``concurrency_limit`` (default 1): at
    most that many jobs of one key run at once. ``interruptible=False``: cancelling a
    running job only sets ``current_job().cancel_requested``.
    """
    if timeout is not None and not (
        isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0
    ):
        raise InvalidJob(f"timeout must be a number of seconds above 0, not {timeout!r}.")
    keys.check_spec(concurrency_key, concurrency_limit)
    if not isinstance(interruptible, bool):
        raise InvalidJob(f"interruptible must be True or False, not {interruptible!r}.")
    options = JobOptions(
        queue=queue,
        priority=priority,
        max_attempts=max_attempts,
        backoff=backoff,
        timeout=timeout,
        concurrency_key=concurrency_key,
        concurrency_limit=concurrency_limit,
        interruptible=interruptible,
    )

    def register(f: Callable[..., Any]) -> JobFunction:
        if isinstance(f, RegisteredJob):
            raise InvalidJob(f"{f.name} is already registered as a job.")
        if not callable(f):
            raise InvalidJob(f"@job needs a function, not {f!r}.")
        qualname = getattr(f, "__qualname__", "")
        if name is None and ("<" in qualname or "." in qualname):
            raise InvalidJob(
                f"@job needs a module-level function; {qualname!r} is nested, so a worker "
                "could not find it. Move it to module level or pass name=."
            )
        if isinstance(concurrency_key, str):
            keys.check_template(f, concurrency_key)
        return add(JobFunction(f, name or f"{f.__module__}.{qualname}", options))

    if func is not None:
        return register(func)
    return register
