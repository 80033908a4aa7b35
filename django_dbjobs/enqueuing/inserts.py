"""INSERTing Job rows fast: the second half of enqueue()'s hot path (rows.py is the first).

``Model.save()`` and ``bulk_create()`` compile the INSERT and prepare every column of
every row anew; for a one-row INSERT that costs more than the database's own work.
Here the SQL is made once per database, row count and shape of row (db/insert_sql.py,
run by db/insert_rows.py; many rows on PostgreSQL go in by COPY instead, db/copy_rows.py): a
column still at its default (status, attempts, the empty error list, ...) is written into
the SQL as a literal, only the job's own values travel as parameters (values shared by
every row once per statement), and the columns the database fills in (``run_at``,
``enqueued_at``: the database clock) are read back with ``RETURNING`` for one row; for
many, the clock is read once (PostgreSQL: in the same statement). This module decides
which jobs go in together and how; db/ writes the SQL.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db import connections, transaction
from django.db.models.expressions import DatabaseDefault
from django.db.models.signals import post_save, pre_save

from ..db import copy_rows, insert_rows, insert_sql
from ..models import Job
from ..signals import has_receivers
from .clock_once import fill_clock
from .rows import MISSING, build_many, field_specs, made_as_built

#: Jobs build_and_copy() builds before handing their rows to psycopg: about as many as it
#: sends at once (32 KiB), so the server has the first rows early.
BUILT_AT_ONCE = 200


def insert(
    instances: list[Job],
    using: str,
    batch_size: int = 1000,
    signals: bool = False,
    given: frozenset | None = None,
    shared: frozenset = frozenset(),
    texts: dict[str, list[str]] | None = None,
    copy: bool = True,
) -> None:
    """INSERT unsaved jobs in as few statements as the database allows; read back its defaults.

    The rows are those ``save(force_insert=True)`` would write. With `signals` (one job
    from enqueue()), Job's save signals are honoured by falling back to save(); the
    bulk path sends none, as ``bulk_create()`` does. MySQL, which cannot return
    columns from an INSERT, goes through ``bulk_create()``. `given` says that every
    job was made by build() or build_many() from values for these fields, so no row
    needs checking for fields changed since; of those, the `shared` ones have the
    same value in every job (sent once per statement, not once per row). `texts` (with `given`) holds,
    for JSON fields, each job's value already as JSON text, in the order of `instances`.
    `copy` False keeps them from PostgreSQL's COPY (bulk.py's one statement in autocommit).
    """
    connection = connections[using]
    if signals and save_receivers():
        for instance in instances:
            instance.save(using=using, force_insert=True)
        return
    if not connection.features.can_return_rows_from_bulk_insert:
        Job.objects.using(using).bulk_create(instances, batch_size=batch_size)
        return
    shapes: dict[tuple, list[Job]] = {}
    if given is not None:
        shapes[made_shape(given, shared)] = instances
    else:
        for instance in instances:
            made = made_as_built(instance)  # prepare()'s jobs, unchanged: known without a look
            shape = _shape(instance) if made is None else made_shape(made, frozenset())
            shapes.setdefault(shape, []).append(instance)
    specs = field_specs()
    ready = texts if given is not None else None
    with transaction.mark_for_rollback_on_error(using):
        for shape, group in shapes.items():
            if copy and copy_rows.usable(connection, len(group)):
                if "d" in shape:
                    shape = fill_clock(connection, shape, group)
                copy_rows.copy(connection, shape, [group], ready, Job, specs)
                continue
            if "d" in shape and not insert_sql.reads_clock_back(connection, len(group)):
                shape = fill_clock(connection, shape, group)
            # Values build() made here (the ids) are plain ASCII: only the given ones need a look.
            made = frozenset() if given is None else _all_names(specs) - given
            insert_rows.insert(connection, Job, specs, shape, group, batch_size, ready, made)
    stored(instances, using)


def build_and_copy(connection, common: dict, each: list[dict], shape: tuple, texts: dict | None) -> list[Job]:
    """rows.build_many(common, each) and db/copy_rows.py's copy() of the jobs, built a chunk
    at a time while the rows before go out: the server stores rows while the next chunk is
    built (a fifth of enqueue_many()'s time was building the jobs, the server waiting).
    Never with init signal receivers (bulk.py): no user code runs while the COPY holds
    the connection. Return the jobs."""
    jobs: list[Job] = []
    using = connection.alias

    def chunks() -> Iterator[list[Job]]:
        for start in range(0, len(each), BUILT_AT_ONCE):
            chunk = build_many(common, each[start : start + BUILT_AT_ONCE], using)
            jobs.extend(chunk)
            yield chunk

    copy_rows.copy(connection, shape, chunks(), texts, Job, field_specs())
    return jobs


def stored(instances: list[Job], using: str) -> None:
    """Mark `instances` as rows of `using`, as save() leaves a job it inserted."""
    for instance in instances:
        instance._state.adding = False
        instance._state.db = using


def save_receivers() -> bool:
    """Whether Job's save signals have receivers (then a job from enqueue() is saved by save())."""
    return has_receivers(Job, pre_save, post_save)


def _shape(instance: Job) -> tuple:
    """Per field: 'd' filled by the database, 'c' at its constant default, 'p' a
    parameter per row (made_shape() also knows 's': one value shared by all rows)."""
    shape = []
    for spec in field_specs():
        value = getattr(instance, spec.attname)
        if isinstance(value, DatabaseDefault):
            shape.append("d")
        elif spec.default is not MISSING and value == spec.default and type(value) is type(spec.default):
            shape.append("c")
        else:
            shape.append("p")
    return tuple(shape)


def made_shape(given: frozenset, shared: frozenset) -> tuple:
    """The shape of the jobs build() makes from values for the `given` fields."""
    shape = _made_shapes.get((given, shared))
    if shape is None:
        shape = _made_shapes[(given, shared)] = tuple(
            "s" if spec.attname in shared else "p" if spec.attname in given else spec.unset
            for spec in field_specs()
        )
    return shape


_made_shapes: dict[tuple, tuple] = {}


def _all_names(specs: list) -> frozenset:
    """The names of every field `specs` describe (field_specs()'s, made once)."""
    if not _names:
        _names.append(frozenset(spec.attname for spec in specs))
    return _names[0]


_names: list[frozenset] = []
