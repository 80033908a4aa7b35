"""Making Job objects fast: the first half of enqueue()'s hot path (inserts.py is the second).

``Job(**fields)`` looks up every field's default through several layers on every
call; here the defaults are worked out once, and a job is a copy of a template with
its own values put in.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

from django.db.models.expressions import DatabaseDefault
from django.db.models.signals import post_init, pre_init

from ..db.rows_read import instance_of
from ..models import Job
from ..models.ids import new_id, new_ids
from ..signals import has_receivers

MISSING = object()


@dataclass(frozen=True)
class FieldSpec:
    """What building and inserting jobs need to know of one concrete Job field, worked out once."""

    field: Any
    attname: str
    is_json: bool
    #: A CharField or TextField: its values are str (or None).
    is_text: bool
    # Fresh-value maker for defaults that differ each time or are mutable; else None.
    make: Any
    # The default, where it is the same every time ([] and {} included); else MISSING.
    default: Any = MISSING
    # A job left at the default: "p" made anew each time (the id), so a parameter;
    # "d" filled in by the database (run_at, enqueued_at); "c" a constant.
    unset: str = "c"
    # A new job's value when it is not the default above: the DatabaseDefault marker.
    initial: Any = MISSING


_specs: list[FieldSpec] = []


def field_specs() -> list[FieldSpec]:
    global _specs
    if not _specs:  # built whole, then published: threads may race here harmlessly
        specs = []
        for field in Job._meta.concrete_fields:
            sample = field.get_default()
            made_anew = field.has_default() and callable(field.default) and field.default not in (list, dict)
            if made_anew or field.default in (list, dict):
                make = field.default  # the id maker, or a fresh [] / {}
            elif isinstance(sample, list | dict):
                make = field.get_default
            else:
                make = None
            specs.append(
                FieldSpec(
                    field,
                    field.attname,
                    field.get_internal_type() == "JSONField",
                    field.get_internal_type() in ("CharField", "TextField"),
                    make=make,
                    default=MISSING if made_anew or isinstance(sample, DatabaseDefault) else sample,
                    unset="p" if made_anew else "d" if isinstance(sample, DatabaseDefault) else "c",
                    # One marker for every new job: the database fills the column in.
                    initial=sample if isinstance(sample, DatabaseDefault) else MISSING,
                )
            )
        _specs = specs
    return _specs


def build(fields: dict[str, Any], using: str) -> Job:
    """Return ``Job(**fields)``, unsaved and bound to `using`, in a fraction of the time."""
    return build_many(fields, [{}], using)[0]


#: The instance attribute where prepare() leaves what made_as_built() checks.
BUILT = "_dbjobs_built"


def remember_build(job: Job, fields: dict[str, Any]) -> Job:
    """Note on `job` (from build(`fields`)) which fields it was given and every field's value
    as built, so that bulk_enqueue() can tell at little cost that it is unchanged since."""
    given = _given_names.get(tuple(fields))
    if given is None:
        given = _given_names[tuple(fields)] = frozenset(fields)
    job.__dict__[BUILT] = (given, _values_of(job.__dict__))
    return job


def made_as_built(job: Job) -> frozenset | None:
    """The fields `job` was given, if remember_build() saw it and no field changed since
    (each value the same object, or equal; a list or dict left at its default, still equal
    to it); else None. Takes the note off the job either way."""
    built = job.__dict__.pop(BUILT, None)
    if built is None:
        return None
    given, values = built
    attributes = job.__dict__
    try:
        if _values_of(attributes) != values:
            return None
    except KeyError:  # a field deleted from the instance: let the full check say
        return None
    for name, default in _mutable_defaults():
        if name not in given and attributes[name] != default:  # changed in place
            return None
    return given


_given_names: dict[tuple, frozenset] = {}
_getters: list = []


def _values_of(attributes: dict) -> tuple:
    if not _getters:
        _getters.append(operator.itemgetter(*(spec.attname for spec in field_specs())))
    return _getters[0](attributes)


def _mutable_defaults() -> list[tuple[str, Any]]:
    global _mutables
    if _mutables is None:  # made whole, then set at once: threads may race to make it
        _mutables = [
            (spec.attname, spec.default) for spec in field_specs() if isinstance(spec.default, list | dict)
        ]
    return _mutables


_mutables: list[tuple[str, Any]] | None = None


def _recipe(given: tuple[str, ...]) -> tuple[dict, list, list]:
    """For jobs given these fields: every field at its default, the fresh-value makers of
    the fields not given, and the field names in order."""
    recipe = _recipes.get(given)
    if recipe is None:
        names = [spec.attname for spec in field_specs()]
        defaults = {
            spec.attname: spec.default if spec.initial is MISSING else spec.initial for spec in field_specs()
        }
        fresh = [
            (spec.attname, spec.make)
            for spec in field_specs()
            if spec.attname not in given and spec.make is not None
        ]
        recipe = _recipes[given] = (defaults, fresh, names)
    return recipe


_recipes: dict[tuple, tuple] = {}


def build_many(common: dict[str, Any], each: list[dict[str, Any]], using: str) -> list[Job]:
    """Return one unsaved Job per dict in `each`: its fields over the `common` ones.

    Every dict in `each` names the same fields.
    """
    defaults, made, names = _recipe(tuple(common) + tuple(each[0]) if each else tuple(common))
    base = {**defaults, **common}
    if len(each) > 1:  # ids for all at once (new_ids()), handed out in order
        made = [(name, iter(new_ids(len(each))).__next__ if make is new_id else make) for name, make in made]
    # Model.__init__ only sets each field's attribute (no field of Job has a data
    # descriptor) between the init signals; without listeners, do just that: a copy of
    # one prepared attribute dict per job.
    plain = not has_receivers(Job, pre_init, post_init)
    jobs = []
    for fields in each:
        values = base.copy()
        for name, make in made:
            values[name] = make()
        values.update(fields)
        if plain:
            jobs.append(instance_of(Job, values, using, adding=True))
        else:
            instance = Job(*(values[name] for name in names))
            instance._state.db = using
            jobs.append(instance)
    return jobs
