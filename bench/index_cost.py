"""W11, what an index of the job table costs each job: enqueue(), enqueue_many() and the
drain with and without it, their runs taking turns (``--only W11``)."""

from django.db import connection

from bench import jobs
from bench.run import DEFAULTS, FASTEST, summarise
from django_dbjobs.models import Job

#: The index weighed: the live jobs by queue (db.ActiveJobsIndex), which the gauges read.
INDEX = "dbjobs_job_active_idx"


def set_index(present: bool) -> None:
    """Make or drop INDEX on the (freshly emptied) job table: instant, nothing to index."""
    with connection.cursor() as cursor:
        exists = INDEX in connection.introspection.get_constraints(cursor, Job._meta.db_table)
    if exists != present:
        index = next(index for index in Job._meta.indexes if index.name == INDEX)
        with connection.schema_editor() as editor:
            (editor.add_index if present else editor.remove_index)(Job, index)


def with_index(present: bool, once):
    """`once`, run with INDEX made (`present`) or dropped first."""

    def run() -> float:
        set_index(present)
        return once()

    return run


def w11_all(runs: int, n1: int, n2: int, taking_turns) -> dict:
    """Each workload's runs with INDEX and without it, taking turns; the index is left made."""
    from bench.workloads import drain, w1_many, w1_single

    workloads = {
        "enqueue(), one per transaction": lambda: w1_single(n1),
        "enqueue_many()": lambda: w1_many(n1),
        "drain, defaults": lambda: drain(jobs.noop, n2, DEFAULTS, []),
        "drain, fastest settings": lambda: drain(jobs.noop, n2, FASTEST[connection.vendor], []),
    }
    results = {}
    for name, once in workloads.items():
        made, dropped = taking_turns(runs, with_index(True, once), with_index(False, once))
        results[f"W11 {name}, no index"] = summarise(dropped)
        results[f"W11 {name}, + active_idx"] = {**summarise(made), "limit": summarise(dropped)["median"]}
    set_index(True)
    return results
