"""What resumable() walks: a QuerySet in the order of a unique key, or a sequence by index."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db.models import Model, QuerySet

#: Rows read by one query of a QuerySet walk.
CHUNK_SIZE = 500


class QuerySource:
    """A QuerySet read in chunks of CHUNK_SIZE rows ordered by `key`, each after the last key done.

    A key read again after a stop must find the row after it whatever was added or deleted
    meanwhile: so it must be unique, and the walk's only order.
    """

    def __init__(self, queryset: QuerySet, key: str):
        if not isinstance(key, str):
            raise TypeError(f"resumable() takes key as a field name, not {type(key).__name__}.")
        if queryset.query.is_sliced:
            raise ValueError(
                "resumable() cannot walk a sliced QuerySet: it filters on the key after the last item "
                "done, which a slice forbids. Filter it instead."
            )
        meta = queryset.model._meta
        try:
            field = meta.pk if key == "pk" else meta.get_field(key)
        except FieldDoesNotExist:
            raise ValueError(f"resumable() key={key!r}: {meta.label} has no field {key!r}.") from None
        if not (getattr(field, "unique", False) and getattr(field, "concrete", False)):
            raise ValueError(
                f"resumable() key={key!r}: {meta.label}.{key} is not unique, so the items after the last "
                "one done cannot be told apart from those before it (rows sharing a value would be "
                "skipped or done twice). Use a unique field: the primary key (the default) or one "
                "with unique=True."
            )
        ordering = tuple(queryset.query.order_by)
        if ordering and ordering not in ((key,), (field.name,), (field.attname,)):
            raise ValueError(
                f"resumable() walks the QuerySet in the order of its key ({key!r}), which is what a "
                f"checkpoint can carry on from; it is ordered by {', '.join(ordering)}. Drop the "
                f"order_by(), or pass the unique field it orders by as key=."
            )
        self.key, self.attname = key, field.attname
        self.queryset = queryset.order_by(key)

    def count(self) -> int:
        return self.queryset.count()

    async def acount(self) -> int:
        return await self.queryset.acount()

    def chunk(self, after: Any) -> list:
        return list(self._after(after)[:CHUNK_SIZE])

    async def achunk(self, after: Any) -> list:
        return [item async for item in self._after(after)[:CHUNK_SIZE]]

    def _after(self, after: Any) -> QuerySet:
        return self.queryset if after is None else self.queryset.filter(**{f"{self.key}__gt": after})

    def key_of(self, item: Any) -> Any:
        """The key of `item` as a checkpoint stores it (JSON: a UUID or a date as its text)."""
        if isinstance(item, Model):
            value = item.pk if self.key == "pk" else getattr(item, self.attname)
        elif isinstance(item, dict) and self.attname in item:  # .values() that names the key
            value = item[self.attname]
        else:
            raise TypeError(
                f"resumable() reads the key {self.key!r} of each item; a {type(item).__name__} "
                "has none. Walk model instances, or .values() that include the key."
            )
        return value if isinstance(value, int | str) else str(value)


class SequenceSource:
    """A list, tuple or range walked by index: the index of the next item is the count done."""

    def __init__(self, items: Sequence):
        self.items = items

    def count(self) -> int:
        return len(self.items)

    async def acount(self) -> int:
        return len(self.items)


def source_of(items: Any, key: str) -> QuerySource | SequenceSource:
    """The source resumable() walks for `items`; a clear error for what it cannot resume."""
    if isinstance(items, QuerySet):
        return QuerySource(items, key)
    if key != "pk":
        raise TypeError("resumable() takes key= for a QuerySet only: a sequence is walked by index.")
    if isinstance(items, Sequence) and not isinstance(items, str | bytes | bytearray):
        return SequenceSource(items)
    raise TypeError(
        f"resumable() takes a QuerySet or a sequence (a list, a tuple, a range), not a "
        f"{type(items).__name__}: only those can be read again from where a stop left them."
    )
