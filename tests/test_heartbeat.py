"""The heartbeat's evidence: a beat proves the worker alive when it was sent (lease.py)."""

import time

import pytest
from django.db import connection

from django_dbjobs import enqueue
from django_dbjobs.conf import settings
from django_dbjobs.models import WorkerProcess
from django_dbjobs.worker.identity import Identity, new_worker_id
from django_dbjobs.worker.leases.heartbeat import Heartbeat, register
from django_dbjobs.worker.leases.lease import Lease
from django_dbjobs.worker.lifecycle.wake_event import WakeEvent
from tests import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_worker_frozen_between_its_beat_and_the_answer_thaws_stale_and_checks_its_jobs():
    """Frozen right after the UPDATE committed (SIGSTOP, a VM pause), a worker may have been
    swept meanwhile: thawed, its beat must not make it look fresh, or a job thread would start
    prefetched jobs that a sweep gave to another worker (test_faults' frozen worker)."""
    identity = Identity(new_worker_id(), "default")
    register(identity, 1)  # the worker's row, as a worker writes it
    given_away = enqueue(jobs.add, 1, 2)  # a prefetched job a sweep put back: not this worker's
    given_away._lease_epoch = 0
    heartbeat = Heartbeat(identity.id, 60, register=lambda: None, using="default")
    lease = Lease(identity, WakeEvent())
    lease.heartbeat = heartbeat
    frozen_for = settings.HEARTBEAT_TIMEOUT / 2 + 0.1

    def freezes_after_the_update(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if sql.startswith("UPDATE"):
            time.sleep(frozen_for)  # the database took the beat; the worker is not running
        return result

    with connection.execute_wrapper(freezes_after_the_update):
        assert heartbeat.beat()
    assert lease._stale(), "the beat's answer, read after the freeze, made the worker look fresh"
    assert not lease.may_start(given_away), "a job the sweep gave away would run twice"
    assert WorkerProcess.objects.filter(pk=identity.id).exists()
    assert heartbeat.beat()  # a beat not frozen on the way is fresh
    assert not lease._stale()
