"""Reading Job rows a hand-written statement returned, without a RawQuerySet.

``Model.objects.raw()`` works out, for every statement it runs, which columns map to
which fields, the converters of each, and the order to pass them to the model: on a
claim of one job that cost about a third of a millisecond, more than the database's
own work before its commit. Here that is worked out once per connection and column list.
"""

from __future__ import annotations

import json
import operator

from django.db import connections
from django.db.models import JSONField, Model
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

from ..signals import has_receivers

#: Where a connection wrapper keeps its plans, {(model, columns): plan}: on the wrapper, so
#: they go with it (a weakly keyed mapping would keep it: the converters refer to it).
_PLANS = "_dbjobs_row_plans"


def jobs_from_cursor(model, using: str, cursor) -> list:
    """The rows left in `cursor` (every concrete column of `model`, in any order) as instances."""
    rows = cursor.fetchall()
    if not rows:
        return []
    return jobs_from_rows(model, using, rows, [column[0] for column in cursor.description])


def jobs_from_rows(model, using: str, rows: list, names) -> list:
    """Rows of every concrete column of `model` (named by `names`, a sequence, in any order) as
    instances."""
    if not rows:
        return []
    columns = names if type(names) is tuple else tuple(names)
    # Per connection object: converters are bound to the connection they were made for.
    connection = connections[using]
    plans = connection.__dict__.get(_PLANS)
    if plans is None:
        plans = connection.__dict__[_PLANS] = {}
    plan = plans.get((model, columns))
    if plan is None:
        plan = plans[(model, columns)] = _plan(model, connection, columns)
    pick, converters, attnames = plan
    # What from_db() does, without Model.__init__ when nothing listens to its signals and
    # from_db() is Model's own: every concrete field's attribute set, then the state.
    plain = model.from_db.__func__ is Model.from_db.__func__ and not has_receivers(model, pre_init, post_init)
    instances = []
    for row in rows:
        values = list(pick(row))
        for position, functions in converters:
            value = values[position]
            for function, expression in functions:
                value = function(value, expression, connection)
            values[position] = value
        if plain:
            instances.append(
                instance_of(model, dict(zip(attnames, values, strict=True)), using, adding=False)
            )
        else:
            instances.append(model.from_db(using, None, values))
    return instances


def instance_of(model, attributes: dict, using: str, adding: bool):
    """An instance of `model` with these attributes (every concrete field's, by attname), as
    Model.__init__ leaves one when nothing listens to its signals: none of Job's fields has
    a data descriptor, so setting each attribute is all it does. The dict becomes the
    instance's own."""
    instance = model.__new__(model)
    state = attributes["_state"] = ModelState()
    state.db = using
    if not adding:
        state.adding = False
    instance.__dict__ = attributes
    return instance


def _plan(model, connection, columns: tuple) -> tuple:
    """What takes each concrete field's value from a row, in field order; the converters to
    apply (by position in that order); the fields' attribute names."""
    index = {name: n for n, name in enumerate(columns)}
    fields = model._meta.concrete_fields
    missing = [field.column for field in fields if field.column not in index]
    if missing:
        raise ValueError(f"The statement did not return the columns {', '.join(missing)}.")
    positions = [index[field.column] for field in fields]
    # itemgetter() of several positions returns a tuple (of one, the value itself).
    pick = operator.itemgetter(*positions) if len(positions) > 1 else lambda row: (row[positions[0]],)
    converters = []
    for position, field in enumerate(fields):
        functions = connection.ops.get_db_converters(field.cached_col) + field.get_db_converters(connection)
        if functions:
            column = field.cached_col
            converters.append((position, [(_faster(function, field), column) for function in functions]))
    return pick, converters, [field.attname for field in fields]


def _faster(function, field):
    """`function`, a converter of `field`; for Django's own JSONField without a decoder, one
    that gives what its from_db_value() gives without the json module for the values a
    claimed job nearly always has (``[]``, ``{}``, NULL)."""
    if getattr(function, "__func__", None) is not JSONField.from_db_value or field.decoder is not None:
        return function
    return _json_value


def _json_value(value, expression, connection):
    """JSONField.from_db_value() of a field without a decoder, read from a column."""
    if value is None:
        return None
    if value == "[]":
        return []
    if value == "{}":
        return {}
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value
