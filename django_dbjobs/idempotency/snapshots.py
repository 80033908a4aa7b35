"""Snapshot: every row of the project's tables, the jobs and the emails, read to compare two runs."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import Any

from django.apps import apps
from django.core import mail
from django.core.exceptions import FieldDoesNotExist
from django.db import models, router
from django.db.models.fields import AutoFieldMixin

#: Apps whose tables say nothing about what a job did: django-dbjobs' own bookkeeping (the
#: jobs a job enqueues are compared apart) and the sessions of the test client.
LEFT_OUT_APPS = frozenset({"django_dbjobs", "sessions"})


@dataclasses.dataclass(frozen=True)
class Ignored:
    """What a comparison leaves out: whole models, and fields of models (by attname)."""

    models: frozenset[type[models.Model]] = frozenset()
    fields: frozenset[tuple[type[models.Model], str]] = frozenset()

    @classmethod
    def parse(cls, names: Iterable[str]) -> Ignored:
        """Read ``"app_label.Model"`` and ``"app_label.Model.field"`` names; raise ValueError for one
        that names no installed model or field."""
        if isinstance(names, str):
            raise ValueError(f"ignore takes a list of names, not the string {names!r}.")
        ignored_models, ignored_fields = set(), set()
        for name in names:
            app_label, _, rest = str(name).partition(".")
            model_name, _, field_name = rest.partition(".")
            try:
                model = apps.get_model(app_label, model_name)
            except (LookupError, ValueError):
                raise ValueError(
                    f"ignore: {name!r} names no installed model; write 'app_label.Model' or "
                    f"'app_label.Model.field', e.g. 'shop.Order.updated_at'."
                ) from None
            if not field_name:
                ignored_models.add(model)
                continue
            try:
                field = model._meta.get_field(field_name)
            except FieldDoesNotExist:
                raise ValueError(f"ignore: {model._meta.label} has no field {field_name!r}.") from None
            ignored_fields.add((model, getattr(field, "attname", field_name)))
        return cls(frozenset(ignored_models), frozenset(ignored_fields))

    def compares(self, model: type[models.Model], field: models.Field) -> bool:
        """Whether `field` of `model` is compared: not ignored, and not auto_now(_add), which
        any save or update_or_create touches."""
        if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            return False
        return (model, field.attname) not in self.fields


@dataclasses.dataclass(frozen=True)
class Table:
    """The rows of one model's table: primary key -> the compared columns' values."""

    model: type[models.Model]
    columns: tuple[str, ...]
    #: For each column, the label of the model its foreign key points at by primary key (or None).
    targets: tuple[str | None, ...]
    rows: dict[Any, tuple]

    @property
    def label(self) -> str:
        return self.model._meta.label

    @property
    def generated_keys(self) -> bool:
        """Whether the database or a default makes the primary keys (a row made again gets a new one)."""
        pk = self.model._meta.pk
        return isinstance(pk, AutoFieldMixin) or pk.has_default()


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The state two runs are compared by: tables, the jobs in the queue, the emails sent."""

    tables: dict[str, Table]
    #: Every job's id, with what it runs: "name(args, kwargs) on queue".
    jobs: dict[str, str]
    #: The emails in django.core.mail.outbox (the test email backend), as "subject → recipients".
    emails: tuple[str, ...]

    @classmethod
    def read(cls, using: str, ignored: Ignored) -> Snapshot:
        """Read every table of `using` whole: for tests, where tables hold a few rows."""
        from ..models import Job

        tables = {
            model._meta.label: _table(model, using, ignored) for model in compared_models(using, ignored)
        }
        jobs = {
            pk: f"{name}(args={args!r}, kwargs={kwargs!r}) on queue {queue!r}"
            for pk, name, args, kwargs, queue in Job.objects.using(using)
            .order_by()
            .values_list("pk", "name", "args", "kwargs", "queue")
        }
        outbox = getattr(mail, "outbox", None) or []
        emails = tuple(f"{message.subject!r} to {', '.join(message.to)}" for message in outbox)
        return cls(tables, jobs, emails)


def compared_models(using: str, ignored: Ignored) -> list[type[models.Model]]:
    """The models whose tables are compared: concrete, managed, on `using`, not left out."""
    return [
        model
        for model in apps.get_models(include_auto_created=True)
        if model._meta.managed
        and not model._meta.proxy
        and model._meta.app_label not in LEFT_OUT_APPS
        and model not in ignored.models
        and router.allow_migrate_model(using, model)
    ]


def _table(model: type[models.Model], using: str, ignored: Ignored) -> Table:
    meta = model._meta
    fields = [
        field
        for field in meta.local_concrete_fields
        if field is not meta.pk and ignored.compares(model, field)
    ]
    targets = tuple(_target(field) for field in fields)
    columns = tuple(field.attname for field in fields)
    rows = {
        values[0]: tuple(_plain(value) for value in values[1:])
        for values in model._base_manager.using(using).order_by().values_list(meta.pk.attname, *columns)
    }
    return Table(model, columns, targets, rows)


def _target(field: models.Field) -> str | None:
    """The model label a foreign key points at, when it points at its primary key."""
    if not (field.many_to_one or field.one_to_one) or field.related_model is None:
        return None
    related = field.related_model._meta
    return related.label if field.target_field is related.pk else None


def _plain(value: Any) -> Any:
    """A value that compares by content and can be a dict key (rows are paired by content):
    a binary column comes back as a memoryview, a JSON one as dicts and lists, an array as a list."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, dict | list):
        return _Frozen(value)
    return value


class _Frozen:
    """A JSON or array value, compared and hashed by its canonical JSON; shown as itself."""

    __slots__ = ("value", "_key")

    def __init__(self, value: Any):
        self.value = value
        self._key = json.dumps(value, sort_keys=True, default=repr)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Frozen) and other._key == self._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return repr(self.value)
