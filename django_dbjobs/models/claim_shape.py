"""The claim of a JobQuerySet: its shape (compiled once per shape in db/claims.py), and running it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import db
from .states import Isolation

if TYPE_CHECKING:
    from .job import Job
    from .queryset import JobQuerySet


def claim(
    model,
    jobs,
    using: str,
    worker: str,
    limit: int,
    queues: list[str] | None,
    include_waiting: bool,
    paused,
    narrowed: bool = False,
    unsorted=None,
) -> list[Job]:
    """JobQuerySet.claim() of `model`, picking among `jobs()` (a JobQuerySet on `using`), which is
    called only when the claim's SQL is first built: the worker claims through this without
    making a QuerySet on each claim (about 60 µs cold, after an idle wait, of a wake-up of
    about 1.5 ms). `narrowed`: `jobs()` is a filtered QuerySet (JobQuerySet._narrowed()).
    `unsorted`: the connection to claim on, as db.claim_jobs() says (None: `using`'s own)."""
    shape = claim_shape(jobs, queues, include_waiting, paused, narrowed)
    if shape is None:
        return []
    return db.claim_jobs(model, using, *shape, worker, limit, unsorted)


def claim_shape(
    jobs,
    queues: list[str] | None,
    include_waiting: bool,
    paused: frozenset[str],
    narrowed: bool = False,
):
    """(build, shape, values) for db.claim_jobs(); None when every queue asked for is paused.

    The shape's last item is `narrowed`: the claim of a filtered QuerySet, compiled for it
    alone (db.claim_pick())."""
    if queues:
        queues = [name for name in queues if name not in paused]
        if not queues:
            return None
        paused = frozenset()  # a list of queues to claim from leaves the paused ones out already
    # Built with placeholders, compiled once per shape; the real names replace them.
    names = [f"\x00queue{n}" for n in range(len(queues or []))]
    skipped = [f"\x00paused{n}" for n in range(len(paused))]

    def build() -> JobQuerySet:
        picked = jobs().claimable().for_queues(names)
        if skipped:
            picked = picked.exclude(queue__in=skipped)
        return picked if include_waiting else picked.filter(isolation=Isolation.NONE)

    values = dict(zip(names, queues or [], strict=True)) | dict(zip(skipped, sorted(paused), strict=True))
    return build, (len(names), len(skipped), include_waiting, narrowed), values
