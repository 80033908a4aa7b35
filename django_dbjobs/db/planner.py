"""without_jit(): PostgreSQL's JIT compiler off for a read whose compiling costs more than it saves.

The planner switches JIT on for a query it expects to be costly (``jit_above_cost``), and
the counts of ``dbjobs_status`` over a large backlog in a large table are: on 1 M ready
jobs among 100 M finished ones, compiling took about 650 ms of CPU for a read of 300 ms.
Nothing elsewhere: MySQL, MariaDB and SQLite have no JIT.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.db import connections, transaction


@contextlib.contextmanager
def without_jit(using: str) -> Iterator[None]:
    """Run the block's queries without JIT on PostgreSQL, in a transaction (``SET LOCAL``).

    Inside a caller's transaction the setting lasts until that one ends: it changes how
    fast a plan runs, never what it returns.
    """
    connection = connections[using]
    if connection.vendor != "postgresql":
        yield
        return
    with transaction.atomic(using=using):
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL jit = off")
        yield
