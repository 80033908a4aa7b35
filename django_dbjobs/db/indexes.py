"""Partial indexes of the job and dependency tables, and their plain stand-ins on MySQL/MariaDB."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class PartialIndex(models.Index):
    """An index over the rows matching `where`, where the database has partial indexes.

    MySQL and MariaDB have none (Django would drop the condition and warn, models.W037),
    so there the index is a plain one led by the `lead` columns, which serves the same
    ``WHERE`` as well. The condition is added here rather than passed to Index, so no
    Django version warns about it. Subclasses set `where` and `lead`.
    """

    where: Q
    lead: tuple[str, ...] = ()
    #: The plain index's columns in full, where lead + fields will not do (KeyedJobsIndex).
    plain: tuple[str, ...] = ()

    def __init__(
        self,
        *args,
        where: Q | None = None,
        lead: list[str] | tuple[str, ...] | None = None,
        plain: list[str] | tuple[str, ...] | None = None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        if where is not None:
            self.where = where
        if lead is not None:
            self.lead = tuple(lead)
        if plain is not None:
            self.plain = tuple(plain)

    def deconstruct(self):
        # Written out in migrations, so a later change of a condition is a new migration,
        # not a silent difference between old and new databases.
        path, args, kwargs = super().deconstruct()
        kwargs = {**kwargs, "where": self.where, "lead": list(self.lead)}
        if self.plain:
            kwargs["plain"] = list(self.plain)
        return path, args, kwargs

    def create_sql(self, model, schema_editor, using="", **kwargs):
        if schema_editor.connection.features.supports_partial_indexes:
            index = models.Index(fields=self.fields, name=self.name, condition=self.where)
        else:
            index = models.Index(fields=list(self.plain or [*self.lead, *self.fields]), name=self.name)
        return index.create_sql(model, schema_editor, using=using, **kwargs)


class ReadyJobsIndex(PartialIndex):
    """The claim index: over READY rows that no flow control holds back (models.Blocked)."""

    where = Q(status="READY", blocked="")
    lead = ("status", "blocked")


class RunningJobsIndex(PartialIndex):
    """Running jobs by worker: a worker's own jobs, the sweep's lost ones, the Workers page.

    Partial, so a new job (READY) or a finished one adds no entry: every INSERT and
    every completion maintains one index fewer than a plain (status, worker) index.
    """

    where = Q(status="RUNNING")
    lead = ("status",)


class ActiveJobsIndex(PartialIndex):
    """The READY and RUNNING jobs by queue, state and due time: what the admin overview,
    dbjobs_status and the database gauges count per queue, with the oldest due job (the
    lag), from the index alone (operations/queue_stats.py).

    Without it that count reads every job: 200 ms to 2 s with a million rows, where the
    index reads only the live ones (the database gauges' benchmark, bench/gauges.py).
    Partial, so a finished job leaves it and the finished millions are never in it: on
    PostgreSQL and SQLite it costs one entry per job inserted and one per claim, taken
    out again by VACUUM (``enqueue_many()`` about 4 µs more per job, 20 % on PostgreSQL;
    ``enqueue()`` and the drain within the noise: bench/index_cost.py). The condition is
    an OR, not an IN: SQLite matches a partial index to a query's bound parameters only
    in that form (``status = ? OR status = ?``).

    MySQL/MariaDB index every row: there it is a plain index led by ``status``, so the
    live jobs are one range of it. Its entry is rewritten at each status change (claim,
    finish), as the other indexes with ``status`` are: the count is by status, so it
    cannot be left out the way RatedJobsIndex and KeyedJobsIndex leave it out.
    """

    where = Q(status="READY") | Q(status="RUNNING")


class FailedJobsIndex(PartialIndex):
    """The dead letters by queue, newest first, and their count per queue (index-only)."""

    where = Q(status="FAILED")
    lead = ("status",)


class FinishedJobsIndex(PartialIndex):
    """Finished jobs by status and finish time: the dead letters newest first, jobs
    finished per minute, retention.

    Partial, so the claim (``status = 'READY'``) can never be planned on it: SQLite
    without statistics would otherwise prefer it to the claim index and sort.
    """

    where = Q(status="SUCCESSFUL") | Q(status="FAILED")


class UniqueKeyIndex(PartialIndex):
    """Jobs by unique key (the admin's search); most jobs have none, and are left out."""

    where = Q(unique_key__isnull=False)


class RatedJobsIndex(PartialIndex):
    """The claim index of the rate-limited queues: their READY jobs by queue, in claim order
    (flow/rates.py). Kept out of the claim index, a backlog waiting for its rate is never
    read by the other claims."""

    where = Q(status="READY", blocked="RATE")
    # Not led by status on MySQL: a status change of any job (two per run) would rewrite
    # its entry. ``blocked = 'RATE'`` holds only for READY jobs.
    lead = ("blocked",)


class KeyedJobsIndex(PartialIndex):
    """Jobs with a concurrency key, by state and key: the slots a key holds, and the jobs
    waiting for one in claim order (flow/admission.py). Jobs without a key are left out.

    MySQL/MariaDB, which index every row, get ``plain``: led by ``blocked`` and without
    ``status``, so a job without a key (``blocked`` stays '') never has its entry rewritten
    when its status changes. ``blocked`` tells the key's jobs apart by itself there:
    CONCURRENCY (waiting), NONE or RATE (holding a slot), DONE (finished).
    """

    where = Q(concurrency_key__isnull=False)
    plain = ("blocked", "concurrency_key", "-priority", "run_at", "id")


class BatchJobsIndex(PartialIndex):
    """The jobs of each batch by status (the batch page, retention); jobs outside batches
    are left out. MySQL/MariaDB index every row: there it holds the batch alone, so a
    status change never rewrites the entry of a job outside a batch."""

    where = Q(batch__isnull=False)
    plain = ("batch",)


class UncountedEdgesIndex(PartialIndex):
    """The dependency rows whose upstream's outcome is still to count: the waits in progress
    (dbjobs_status's stuck workflows). Counted rows, most of the table, are left out; on
    MySQL/MariaDB led by ``counted``, rewritten once per row, when it is counted."""

    where = Q(counted=False)
    lead = ("counted",)
