"""enqueue()'s INSERT of one job, with as little Python around it as it can have.

One job per transaction is the most common enqueue, and its cost beside the database's
own work is Python: between two round trips (the statement, then the commit's flush)
the interpreter runs cold, so every step counts several times over. This path takes
the fewest:

* the job's name, queue, priority and maximum attempts (validated values, and the same
  for most jobs of a kind) and empty keyword arguments are written into the SQL as
  literals, one statement per such combination, made once: only the id, the arguments
  and the few other values of this job travel as parameters;
* the statement runs through db/direct.py: libpq on PostgreSQL, the backend's own cursor
  elsewhere, with what Django's cursor adds around it kept. ``execute_wrapper()`` and
  logged queries (DEBUG, ``assertNumQueries``) see it as before.

Save signals (they need ``save()``) and MySQL, which cannot return the database's clock
from an INSERT, take the usual way, inserts.insert().
"""

from __future__ import annotations

from django.db import connections

from . import insert_sql
from .db import direct
from .inserts import db_param, save_receivers, shared_literal
from .models import Job
from .rows import field_specs

#: The fields written into the statement as literals when a job has them.
SHARED = frozenset({"name", "queue", "priority", "max_attempts"})
#: Statements kept: beyond this many combinations of literals, the cache starts again.
MAX_STATEMENTS = 1024

_statements: dict[tuple, tuple] = {}


def insert(instance: Job, given: frozenset, using: str) -> bool:
    """INSERT a job rows.build() made from values for the `given` fields; read back its clock.

    Return False, having done nothing, when this path does not apply (see above): the
    caller then inserts it through inserts.insert().
    """
    connection = connections[using]
    if not connection.features.can_return_columns_from_insert or save_receivers():
        return False
    shared = SHARED & given
    if "kwargs" in given and instance.kwargs == {}:
        shared = shared | {"kwargs"}
    key = (using, given, shared, *(getattr(instance, name) for name in sorted(shared - {"kwargs"})))
    statement = _statements.get(key)
    if statement is None:
        statement = _statement(connection, instance, given, shared)
        if len(_statements) >= MAX_STATEMENTS:
            _statements.clear()
        _statements[key] = statement
    sql, params, returning = statement
    values = [db_param(connection, spec, getattr(instance, spec.attname)) for spec in params]
    row = direct.run(connection, sql, values)
    for (field, converters), value in zip(returning, row, strict=True):
        for converter in converters:
            value = converter(value, field.cached_col, connection)
        setattr(instance, field.attname, value)
    instance._state.adding = False
    instance._state.db = using
    return True


def _statement(connection, instance: Job, given: frozenset, shared: frozenset) -> tuple:
    """(SQL, the fields sent as parameters, the columns read back) for jobs like `instance`."""
    shape = tuple(
        "s" if spec.attname in shared else "p" if spec.attname in given else spec.unset
        for spec in field_specs()
    )
    plan = insert_sql.plan(connection.alias, shape, many=False)
    quote = connection.schema_editor().quote_value
    row = "".join(
        part if isinstance(part, str) else shared_literal(connection, part, instance, quote)
        for part in plan.row
    )
    return plan.head + row + plan.tail, plan.params, plan.returning
