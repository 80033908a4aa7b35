"""Workflows that can no longer finish, for dbjobs_status: jobs waiting for a job that is
gone, batches waiting for jobs that are gone, and jobs and batches waiting for each other.

Reads the dependency rows not counted yet (on their partial index) and the jobs they name,
and the open batches, each with whether it still has an active job, in one statement (one
snapshot): never the finished jobs. Beyond MAX_EDGES rows, what is not read is taken to
finish: all that is reported is stuck, though not all that is stuck may be reported.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db.models import OuterRef

from ..db import ExistsOnIndex
from ..models import Batch, Job, JobDependency, JobStatus

#: Dependency rows, and open batches, read at most.
MAX_EDGES = 10_000
MAX_BATCHES = 1_000
#: Ids per statement: well under SQLite's limit of bound parameters.
CHUNK = 500
CALLBACKS = ("on_success", "on_failure", "on_complete")
ACTIVE = (JobStatus.READY, JobStatus.RUNNING)
FINISHED = (JobStatus.SUCCESSFUL, JobStatus.FAILED)


@dataclass(frozen=True)
class StuckWorkflow:
    """What keeps jobs waiting for ever: a job gone, a batch's jobs gone, or a cycle."""

    #: "job_gone", "batch_jobs_gone" or "cycle".
    kind: str
    message: str
    jobs: tuple[str, ...] = ()
    batches: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "jobs": self.jobs, "batches": self.batches}


def read_stuck(using: str = "default") -> tuple[list[StuckWorkflow], int, bool]:
    """What keeps workflows from finishing, how many waiting jobs never run because of it,
    and whether there was more to read than was read."""
    edges = list(
        JobDependency.objects.using(using)
        .filter(counted=False)
        .order_by("job", "upstream")
        .values_list("pk", "job_id", "upstream")[: MAX_EDGES + 1]
    )
    active = Job._base_manager.filter(batch=OuterRef("pk"), status__in=ACTIVE)
    batches = list(
        Batch.objects.using(using)
        .filter(finished_at__isnull=True)
        .annotate(has_active=ExistsOnIndex(active, "dbjobs_job_batch_idx"))
        .order_by("created_at", "pk")
        .values_list("pk", "total", "succeeded", "failed", "has_active", *CALLBACKS)[: MAX_BATCHES + 1]
    )
    truncated = len(edges) > MAX_EDGES or len(batches) > MAX_BATCHES
    edges, batches = edges[:MAX_EDGES], batches[:MAX_BATCHES]
    # Read last, so that a job released or cancelled since the edges were read is seen so.
    states: dict[str, tuple] = {}
    jobs = Job._base_manager.using(using)
    for chunk in _chunks(sorted({pk for _e, job, upstream in edges for pk in (job, upstream)})):
        rows = jobs.filter(pk__in=chunk).values_list("pk", "status", "blocked", "batch_id", "name")
        states.update((pk, tuple(state)) for pk, *state in rows)
    waiting = {pk for pk, (status, blocked, *_r) in states.items() if (status, blocked) == ("READY", "AFTER")}

    waits: dict[str, set[str]] = defaultdict(set)
    suspects = {}  # dependency row: its upstream, gone or finished without counting it
    for edge, job, upstream in edges:
        if job in waiting:
            waits[job].add(upstream)
            if upstream not in states or states[upstream][0] in FINISHED:
                suspects[edge] = upstream
    # An outcome counts its rows in its own transaction: a row still not counted now, of a
    # job finished (or gone) when read above, will never be.
    confirmed = set()
    for chunk in _chunks(sorted(suspects)):
        rows = JobDependency.objects.using(using).filter(pk__in=chunk, counted=False)
        confirmed |= {suspects[edge] for edge in rows.values_list("pk", flat=True)}
    gone = set(confirmed)
    members = defaultdict(set)
    for pk in waiting:
        if states[pk][2] is not None:
            members[states[pk][2]].add(pk)
    emptied = []
    for pk, total, succeeded, failed, has_active, *callbacks in batches:
        node = f"batch {pk}"
        for callback in filter(None, callbacks):
            waits[callback].add(node)
        waits[node] |= members[pk]
        if total > succeeded + failed and not has_active:
            gone.add(f"the jobs gone of batch {pk}")
            waits[node].add(f"the jobs gone of batch {pk}")
            emptied.append((pk, total - succeeded - failed))
    stuck = cannot_finish(waits, gone)
    never_run = [node for node in stuck if not node.startswith("batch ")]

    found = []
    for upstream in sorted(confirmed):
        waiters = sorted(pk for pk in stuck if upstream in waits.get(pk, ()))
        how = "no longer exists" if upstream not in states else "finished without releasing them"
        found.append(
            StuckWorkflow(
                "job_gone",
                f"job {upstream} {how}: {_jobs(len(waiters))} waiting for it will never run "
                f"({_some(waiters)})",
                jobs=(upstream, *waiters),
            )
        )
    for pk, count in emptied:
        found.append(
            StuckWorkflow(
                "batch_jobs_gone",
                f"batch {pk} waits for {_jobs(count)} that no longer exist: it will never finish, "
                "nor its callbacks run",
                batches=(pk,),
            )
        )
    for cycle in cycles(waits, stuck):
        names = [_name(node, states) for node in [*cycle, cycle[0]]]
        found.append(
            StuckWorkflow(
                "cycle",
                f"jobs wait for each other and will never run: {' waits for '.join(names)}",
                jobs=tuple(node for node in cycle if not node.startswith("batch ")),
                batches=tuple(node.removeprefix("batch ") for node in cycle if node.startswith("batch ")),
            )
        )
    return found, len(never_run), truncated


def cannot_finish(waits: dict[str, set[str]], gone: set[str]) -> set[str]:
    """The nodes of `waits` (each with the nodes it waits for) that never finish: those that
    wait, at once or through others, for one in `gone`, or for themselves. Any other node
    (a job that is not waiting, say) finishes."""
    left = {node: {d for d in needs if d in waits or d in gone} for node, needs in waits.items()}
    dependents = defaultdict(set)
    for node, needs in left.items():
        for need in needs:
            dependents[need].add(node)
    done = [node for node, needs in left.items() if not needs]
    finishing = set()
    while done:
        node = done.pop()
        finishing.add(node)
        for dependent in dependents[node]:
            left[dependent].discard(node)
            if not left[dependent]:
                done.append(dependent)
    return set(waits) - finishing


def cycles(waits: dict[str, set[str]], stuck: set[str]) -> list[list[str]]:
    """One cycle of each separate knot among the `stuck` nodes, each from its least node."""
    inside = {node: {d for d in waits[node] if d in stuck} for node in stuck}
    found = []
    while True:
        # What waits only for what is gone (or for nothing left) is behind a knot, not in one.
        sinks = [node for node, needs in inside.items() if not needs]
        while sinks:
            sink = sinks.pop()
            del inside[sink]
            for node, needs in inside.items():
                if sink in needs:
                    needs.discard(sink)
                    if not needs:
                        sinks.append(node)
        if not inside:
            return found
        path, node = [], min(inside)
        while node not in path:  # every node left waits for another left: the walk comes back
            path.append(node)
            node = min(inside[node])
        cycle = path[path.index(node) :]
        start = cycle.index(min(cycle))
        found.append(cycle[start:] + cycle[:start])
        # Forget the knot and all that waits for it: another knot is reported once.
        behind, reached = set(cycle), True
        while reached:
            more = {n for n, needs in inside.items() if n not in behind and needs & behind}
            behind |= more
            reached = bool(more)
        inside = {n: needs - behind for n, needs in inside.items() if n not in behind}


def _name(node: str, states: dict[str, tuple]) -> str:
    if node.startswith("batch "):
        return node
    state = states.get(node)
    return f"job {node} ({state[3]})" if state else f"job {node}"


def _jobs(count: int) -> str:
    return f"{count} job" if count == 1 else f"{count} jobs"


def _some(pks: list[str], shown: int = 3) -> str:
    return ", ".join(pks[:shown]) + (f" and {len(pks) - shown} more" if len(pks) > shown else "")


def _chunks(items: list) -> list[list]:
    return [items[start : start + CHUNK] for start in range(0, len(items), CHUNK)]
