"""resumable() and aresumable(): walk a QuerySet or a list in a job, carrying on from its checkpoint.

The job's checkpoint holds the walk's place: ``{"done": n}`` and, for a QuerySet, the
key of the last item done (``"after"``). It is stored every `every` items or `seconds`
seconds and at the end; when the worker is asked to stop, after the item in hand, and
the job then hands itself back (ResumeLater), uncharged, for another worker to carry on.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from ..context import current_job
from ..exceptions import JobInterrupted, ResumeLater
from .sources import QuerySource, SequenceSource, source_of

if TYPE_CHECKING:
    from ..models import Job


def resumable(items: Any, *, every: int = 100, seconds: float = 10.0, key: str = "pk") -> Iterator[Any]:
    """Yield `items` (a QuerySet or a sequence) from where this job's last run stopped.

    A QuerySet is read in chunks ordered by `key` (unique: the primary key by default), a
    sequence by index. The place is stored with ``current_job().checkpoint()`` every
    `every` items or `seconds` seconds, and after the last; progress is reported as
    (done, total). When the worker is asked to stop (``current_job().stopping``), the
    walk stores its place once the item in hand is done and raises ResumeLater. Raises
    RuntimeError outside a running job, and JobInterrupted if the worker lost the job.
    """
    walk = Walk(items, every, seconds, key)
    return _walk(walk)


def aresumable(items: Any, *, every: int = 100, seconds: float = 10.0, key: str = "pk") -> AsyncIterator[Any]:
    """resumable() for an ``async def`` job: ``async for item in aresumable(...)``."""
    walk = Walk(items, every, seconds, key)
    return _awalk(walk)


def _walk(walk: Walk) -> Iterator[Any]:
    job, source = walk.job, walk.source
    walk.total = source.count()
    while True:
        chunk = walk.remaining() if isinstance(source, SequenceSource) else source.chunk(walk.after)
        for item in chunk:
            if job.stopping:
                walk.stored(job.checkpoint(walk.place()) if walk.unsaved else True)
                raise ResumeLater()
            yield item
            walk.step(item)
            if walk.save_due():
                walk.stored(job.checkpoint(walk.place()))
        if not chunk or isinstance(source, SequenceSource):
            break
    if walk.unsaved:
        walk.stored(job.checkpoint(walk.place()))


async def _awalk(walk: Walk) -> AsyncIterator[Any]:
    job, source = walk.job, walk.source
    walk.total = await source.acount()
    while True:
        chunk = walk.remaining() if isinstance(source, SequenceSource) else await source.achunk(walk.after)
        for item in chunk:
            if job.stopping:
                walk.stored(await job.acheckpoint(walk.place()) if walk.unsaved else True)
                raise ResumeLater()
            yield item
            walk.step(item)
            if walk.save_due():
                walk.stored(await job.acheckpoint(walk.place()))
        if not chunk or isinstance(source, SequenceSource):
            break
    if walk.unsaved:
        walk.stored(await job.acheckpoint(walk.place()))


class Walk:
    """Where a resumable() walk is: how many items are done, the key of the last, what is unsaved."""

    def __init__(self, items: Any, every: int, seconds: float, key: str):
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(
                f"resumable() takes every= as a whole number of items, 1 or more; got {every!r}."
            )
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
            raise ValueError(f"resumable() takes seconds= as a number of seconds above 0; got {seconds!r}.")
        job = current_job()
        if job is None or not job._running:
            raise RuntimeError(
                "resumable() is for a job's own code while it runs: it stores its place with "
                "current_job().checkpoint(), and there is no running job here."
            )
        self.job: Job = job
        self.source = source_of(items, key)
        self.every, self.seconds = every, seconds
        self.done, self.after = _place(job.resume, self.source)
        self.total = 0
        self.unsaved = 0
        self.saved_at = time.monotonic()

    def remaining(self) -> Any:
        """What is left of a sequence: its items from the first not done."""
        assert isinstance(self.source, SequenceSource)
        return self.source.items[self.done :]

    def step(self, item: Any) -> None:
        """`item` is done (the job asked for the next one, or the walk ended)."""
        if isinstance(self.source, QuerySource):
            self.after = self.source.key_of(item)
        self.done += 1
        self.unsaved += 1
        self.job.progress(self.done, max(self.total, self.done))

    def save_due(self) -> bool:
        return self.unsaved >= self.every or time.monotonic() - self.saved_at >= self.seconds

    def place(self) -> dict:
        """The checkpoint this walk stores: what _place() reads back."""
        if isinstance(self.source, QuerySource):
            return {"done": self.done, "after": self.after}
        return {"done": self.done}

    def stored(self, won: bool) -> None:
        """The place was stored (`won`) or the worker lost the job: stop walking, then."""
        if not won:
            raise JobInterrupted(
                "this worker no longer owns the job (a sweep gave it back): resumable() stopped; the "
                "job carries on elsewhere from its last checkpoint"
            )
        self.unsaved, self.saved_at = 0, time.monotonic()


def _place(resume: Any, source: QuerySource | SequenceSource) -> tuple[int, Any]:
    """(items done, key of the last) from the job's checkpoint; (0, None) for none."""
    if resume is None:
        return 0, None
    done = resume.get("done") if isinstance(resume, dict) else None
    keyed = isinstance(source, QuerySource)
    if (
        isinstance(done, int)
        and not isinstance(done, bool)
        and done >= 0
        and set(resume) == ({"done", "after"} if keyed else {"done"})
    ):
        return done, resume.get("after")
    raise ValueError(
        f"resumable() cannot carry on from this job's checkpoint {resume!r}: it is not one "
        f"resumable() stores for a {'QuerySet' if keyed else 'sequence'}. A job walks one resumable(); "
        "to start over, clear the checkpoint (current_job().checkpoint(None)) first."
    )
