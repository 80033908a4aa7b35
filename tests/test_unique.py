import os
import subprocess
import sys
import time

import pytest
from django.db import connection, transaction

from django_dbjobs import bulk_enqueue, enqueue, prepare
from django_dbjobs.enqueuing import wakeup
from django_dbjobs.exceptions import InvalidJob
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.worker.running import execution
from tests import jobs
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db(transaction=True)


def test_second_enqueue_with_the_same_key_returns_the_first_job():
    first = enqueue(jobs.add, 1, 2, unique_key="sum")
    before = wakeup.generation()
    second = enqueue(jobs.add, 3, 4, unique_key="sum")
    assert second.pk == first.pk and second.args == [1, 2]
    assert Job.objects.count() == 1
    assert wakeup.generation() == before, "a duplicate wakes nobody"


def test_same_key_on_different_jobs_does_not_clash():
    enqueue(jobs.add, 1, 2, unique_key="k")
    enqueue(jobs.echo, 1, unique_key="k")
    assert Job.objects.count() == 2


def test_a_running_job_keeps_its_key_and_is_left_alone():
    job = enqueue(jobs.add, 1, 2, unique_key="k")
    with transaction.atomic():
        Job.objects.claim("w", 1)
    again = enqueue(jobs.add, 1, 2, unique_key="k")
    assert again.pk == job.pk
    row = Job.objects.get()
    assert (row.status, row.attempts, row.worker) == (JobStatus.RUNNING, 1, "w")


def test_key_frees_up_when_the_job_finishes():
    job = enqueue(jobs.add, 1, 2, unique_key="k")
    with transaction.atomic():
        (claimed,) = Job.objects.claim("w", 1)
    execution.run(claimed, "w")
    assert Job.objects.get(pk=job.pk).active_key is None
    second = enqueue(jobs.add, 1, 2, unique_key="k")
    assert second.pk != job.pk and Job.objects.count() == 2


def test_rolled_back_enqueue_does_not_hold_the_key():
    with pytest.raises(RuntimeError), transaction.atomic():
        enqueue(jobs.add, 1, 2, unique_key="k")
        raise RuntimeError
    job = enqueue(jobs.add, 1, 2, unique_key="k")
    assert Job.objects.get().pk == job.pk


def test_duplicate_inside_a_transaction_leaves_it_usable():
    with transaction.atomic():
        first = enqueue(jobs.add, 1, 2, unique_key="k")
        assert enqueue(jobs.add, 1, 2, unique_key="k").pk == first.pk
        enqueue(jobs.add, 5, 5)
    assert Job.objects.count() == 2


def test_bad_keys_and_bulk_unique_are_refused():
    with pytest.raises(InvalidJob, match="unique_key"):
        enqueue(jobs.add, 1, 2, unique_key="")
    with pytest.raises(InvalidJob, match="unique_key"):
        bulk_enqueue([prepare(jobs.add, 1, 2, unique_key="k")])
    assert Job.objects.count() == 0


ENQUEUE_SCRIPT = """
import time, django
django.setup()
from django.db import transaction
from django_dbjobs import enqueue
start = float(__import__("sys").argv[1])
time.sleep(max(0, start - time.time()))
with transaction.atomic():
    job = enqueue("tests.jobs.add", 1, 2, unique_key="race")
    time.sleep(0.2)  # hold the transaction open while the others insert
print(job.pk)
"""


@pytest.mark.slow
def test_eight_processes_racing_on_one_key_store_exactly_one_job():
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DBJOBS_TEST_DATABASE_NAME": str(connection.settings_dict["NAME"]),
        "PYTHONPATH": str(ROOT),
    }
    start = time.time() + 3
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", ENQUEUE_SCRIPT, str(start)],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    outputs = [p.communicate(timeout=60) for p in processes]
    assert all(p.returncode == 0 for p in processes), [err for _, err in outputs]
    assert Job.objects.count() == 1
    assert {out.strip() for out, _ in outputs} == {Job.objects.get().pk}
