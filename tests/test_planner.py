"""db.without_jit(): PostgreSQL's JIT off for the block's queries alone; nothing elsewhere."""

import pytest
from django.db import connection, transaction

from django_dbjobs import db
from django_dbjobs.operations.queue_stats import queue_rows

pytestmark = pytest.mark.django_db(transaction=True)


def jit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        return cursor.fetchone()[0]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="only PostgreSQL has a JIT compiler")
def test_jit_is_off_inside_the_block_and_as_it_was_after():
    before = jit()
    with db.without_jit("default"):
        assert jit() == "off"
    assert jit() == before
    with transaction.atomic():
        with db.without_jit("default"):
            assert jit() == "off"
        assert jit() == "off", "SET LOCAL lasts until the caller's transaction ends"
    assert jit() == before


def test_the_block_runs_its_queries_on_every_database():
    with db.without_jit("default"):
        assert queue_rows() == []
    assert not connection.in_atomic_block
