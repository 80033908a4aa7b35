"""Every READY job is taken by some claim path of a worker serving its queue.

A READY job can be left in any state a process wrote, whatever its settings said: a
worker still on the old DBJOBS_QUEUE_LIMITS admits a keyed job as claimable in a queue
that is now rate-limited, an enqueue from a process without the setting stores a job
unblocked, an admission stores RATE in a queue whose limit has since gone. Each such
state must be taken by a worker on the current settings (by its claims, its admission,
or its pass applying the setting to waiting jobs): a state no claim path takes is a lost
job, and a keyed one holds its key's slot forever.
"""

import itertools
import json

import pytest

from django_dbjobs import enqueue
from django_dbjobs.models import Blocked, Isolation, Job, JobStatus
from tests import jobs

RATED = "rated"
#: The READY states a process (on any settings) can store, by queue and key.
STATES = [
    (queue, keyed, blocked, isolation)
    for queue, keyed, isolation in itertools.product(
        ["default", RATED], [False, True], [Isolation.NONE, Isolation.WAITING]
    )
    for blocked in (
        [Blocked.NONE, Blocked.RATE, Blocked.CONCURRENCY] if keyed else [Blocked.NONE, Blocked.RATE]
    )
]


def store(queue, keyed, blocked, isolation, n):
    """A READY job of `queue` left in the given state, as some process could have written it."""
    key = {"concurrency_key": f"path:{n}", "concurrency_limit": 1} if keyed else {}
    stored = enqueue(jobs.add, n, 0, queue=queue, **key)
    Job.objects.filter(pk=stored.pk).update(blocked=blocked, isolation=isolation)
    return stored.pk


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("limits", [{RATED: {"rate": "1000/m"}}, {}], ids=["limit-added", "limit-removed"])
def test_every_ready_state_is_taken_by_a_worker_on_the_current_settings(run_jobs, limits):
    stored = {store(*state, n): state for n, state in enumerate(STATES)}
    env = {"DBJOBS_TEST_QUEUE_LIMITS": json.dumps(limits)} if limits else {}
    worker = run_jobs("--burst", "--concurrency", "2", env=env)
    assert worker.wait() == 0, worker.output()
    left = {
        stored[pk]: (status, blocked)
        for pk, status, blocked in Job.objects.exclude(status=JobStatus.SUCCESSFUL).values_list(
            "pk", "status", "blocked"
        )
    }
    assert left == {}, left
