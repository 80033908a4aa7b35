"""A claim takes at most its limit, whatever plan the database makes of it.

PostgreSQL may run the claim's ``UPDATE ... WHERE id IN (<pick ... LIMIT n FOR UPDATE
SKIP LOCKED>)`` as a nested-loop semi-join that runs the pick again for each row it
updates; each run skips the rows the last one locked and takes the next ones, so a claim
of 1 took 3 jobs. It happened with dead rows in the table and fresh statistics: a
drained queue after autovacuum's ANALYZE, an ordinary state in production.
"""

import pytest
from django.db import connection, transaction

from django_dbjobs import enqueue_many
from django_dbjobs.models import Job, JobStatus
from tests import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def dead_rows_then_statistics(count: int) -> None:
    with transaction.atomic():
        enqueue_many(jobs.add, [(1, 1)] * count)
        transaction.set_rollback(True)  # inserted and rolled back: dead rows
    with connection.cursor() as cursor:
        cursor.execute(
            {"mysql": "ANALYZE TABLE django_dbjobs_job"}.get(connection.vendor, "ANALYZE django_dbjobs_job")
        )


@pytest.mark.parametrize("limit, waiting", [(1, 3), (2, 7), (10, 40)])
def test_a_claim_takes_at_most_its_limit_after_dead_rows_and_fresh_statistics(limit, waiting):
    dead_rows_then_statistics(2500)
    enqueue_many(jobs.add, [(1, 2)] * waiting)
    claimed = Job.objects.claim("w1", limit)
    assert len(claimed) == limit
    assert Job.objects.filter(status=JobStatus.RUNNING).count() == limit
