"""Naming the index a read must use: ``INDEXED BY`` (SQLite), ``FORCE INDEX`` (MySQL/MariaDB)."""

from __future__ import annotations

import re

from django.db import connections
from django.db.models import Exists


def on_index(sql: str, connection, table: str, index: str) -> str:
    """`sql`, reading `table` on `index`: ``INDEXED BY`` on SQLite, ``FORCE INDEX`` on
    MySQL/MariaDB; unchanged on PostgreSQL, which has no index hints. `sql` must name the
    table once, as Django's compiler writes it (quoted, followed by a space)."""
    vendor = connection.vendor
    if vendor not in ("sqlite", "mysql"):
        return sql
    quote = connection.ops.quote_name
    source = f"FROM {quote(table)} "
    if sql.count(source) != 1:
        raise AssertionError(f"Unexpected SQL: {sql}")
    hint = f"INDEXED BY {quote(index)}" if vendor == "sqlite" else f"FORCE INDEX ({quote(index)})"
    return sql.replace(source, f"{source}{hint} ")


def pks_on_index(queryset, index: str, limit: int) -> list:
    """The primary keys of `queryset` (ordered and locked as it says), at most `limit`, read on `index`.

    MySQL/MariaDB only (``FORCE INDEX``): without it the planner may read another index
    and sort, and a locking read that sorts locks every row it matched, not only those
    its LIMIT keeps (others' ``SKIP LOCKED`` reads then find nothing). PostgreSQL plans
    it well; SQLite has no row locks.
    """
    using = queryset.db
    connection = connections[using]
    picked = queryset.values_list("pk")[:limit]
    if connection.vendor != "mysql":
        return [row[0] for row in picked]
    sql, params = picked.query.get_compiler(using=using).as_sql()
    sql = on_index(sql, connection, queryset.model._meta.db_table, index)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


class ExistsOnIndex(Exists):
    """``Exists(queryset)``, its subquery read on `index` on MySQL/MariaDB (``FORCE INDEX``).

    MariaDB estimates the rows of one value of an index from the number of distinct
    values: with a few batches among a million jobs outside any, "the jobs of this batch"
    looks like half the table, and it reads the jobs of a status range instead (about
    20,000 rows per open batch, seconds in all, on the gauges benchmark).
    """

    def __init__(self, queryset, index: str, **kwargs):
        super().__init__(queryset, **kwargs)
        self.index = index

    def as_mysql(self, compiler, connection, **extra_context):
        sql, params = self.as_sql(compiler, connection, **extra_context)
        quote = connection.ops.quote_name
        table = re.escape(quote(self.query.model._meta.db_table))
        hinted, found = re.subn(
            rf"FROM {table} (`U\d+`) ", rf"\g<0>FORCE INDEX ({quote(self.index)}) ", sql, count=1
        )
        if not found:
            raise AssertionError(f"Unexpected SQL: {sql}")
        return hinted, params
