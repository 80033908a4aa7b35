"""enqueue()'s INSERT of one job, with as little Python around it as it can have.

One job per transaction is the most common enqueue, and its cost beside the database's
own work is Python: between two round trips (the statement, then the commit's flush)
the interpreter runs cold, so every step counts several times over. This path takes
the fewest: one statement per set of given fields, made once (db/insert_sql.py), with
every field left at its constant default (empty keyword arguments included) written in as
a literal and the job's own values as parameters; it runs through db/direct.py (libpq on
PostgreSQL, as a prepared statement where the project allows them: db/prepared.py; the
backend's own cursor elsewhere; Django's cursor where something watches queries).

Save signals (they need ``save()``) and MySQL, which cannot return the database's clock
from an INSERT (MariaDB can: ``RETURNING``), take the usual way, inserts.insert().
"""

from __future__ import annotations

from django.db import connections

from ..db import direct, insert_sql
from ..db.insert_rows import db_param, set_returned
from ..models import Job
from .inserts import save_receivers
from .rows import field_specs

_statements: dict[tuple, tuple] = {}


def insert(instance: Job, given: frozenset, using: str) -> bool:
    """INSERT a job rows.build() made from values for the `given` fields; read back its clock.

    Return False, having done nothing, when this path does not apply (see above): the
    caller then inserts it through inserts.insert().
    """
    connection = connections[using]
    if not connection.features.can_return_columns_from_insert or save_receivers():
        return False
    if "kwargs" in given and type(instance.kwargs) is dict and not instance.kwargs:
        given = given - {"kwargs"}  # at its default: a literal in the statement
    key = (using, given)
    statement = _statements.get(key)
    if statement is None:
        statement = _statements[key] = _statement(connection, given)
    sql, params, returning = statement
    values = [db_param(connection, spec, getattr(instance, spec.attname)) for spec in params]
    set_returned(connection, instance, returning, direct.run(connection, sql, values, prepare=True))
    instance._state.adding = False
    instance._state.db = using
    return True


def _statement(connection, given: frozenset) -> tuple:
    """(SQL, the fields sent as parameters, the columns read back) for jobs given these fields."""
    shape = tuple("p" if spec.attname in given else spec.unset for spec in field_specs())
    plan = insert_sql.plan(connection.alias, Job, field_specs(), shape, many=False)
    return plan.head + "".join(plan.row) + plan.tail, plan.params, plan.returning
