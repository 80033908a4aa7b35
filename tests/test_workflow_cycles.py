"""Jobs that would wait for themselves through their batch's callbacks are refused at enqueue."""

import pytest

from django_dbjobs import after, batch, bulk_enqueue, enqueue, enqueue_many, prepare
from django_dbjobs.exceptions import DependencyCycle, InvalidJob
from django_dbjobs.models import Batch, Job, JobDependency
from django_dbjobs.testing import run_jobs
from tests import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def test_waiting_for_its_own_batchs_callback_is_refused_and_writes_nothing(record_file):
    with batch(description="album", on_complete=jobs.batch_completed) as album:
        enqueue(jobs.noop, 1)
        cycle = f"joins batch {album.pk} and waits for job {album.on_complete}"
        with pytest.raises(DependencyCycle, match=cycle):
            enqueue(jobs.noop, 2, after=[album.on_complete])
        with pytest.raises(DependencyCycle, match="These jobs would wait for themselves"):
            enqueue_many(jobs.noop, [(3,), (4,)], after=[album.on_complete])
        with pytest.raises(DependencyCycle):
            bulk_enqueue([prepare(jobs.noop, 5)], after=[album.on_complete])
        with after(album.on_complete), pytest.raises(DependencyCycle):
            enqueue(jobs.noop, 6)
    assert Job.objects.count() == 2 and not JobDependency.objects.exists()
    assert not Job.objects.get(pk=album.on_complete).has_dependents
    run_jobs()
    assert record_file.read_text().split() == ["complete:album:1:1:0"], "the batch was not held open"


def test_a_chain_back_to_its_own_batchs_callback_is_refused_naming_each_job():
    with batch(on_complete=jobs.batch_completed) as album:
        enqueue(jobs.noop, 1)
    outside = enqueue(jobs.noop, 2, after=[album.on_complete])  # no cycle: it is not in the batch
    with pytest.raises(DependencyCycle) as refused:
        enqueue(jobs.noop, 3, batch=album, after=[outside])
    assert f"waits for job {outside.pk}, which waits for job {album.on_complete}" in str(refused.value)
    assert isinstance(refused.value, InvalidJob)
    assert Batch.objects.get(pk=album.pk).total == 1


def test_two_batches_waiting_for_each_others_callbacks_are_refused():
    with batch(on_complete=jobs.batch_completed) as first:
        enqueue(jobs.noop, 1)
    with batch(on_complete=jobs.batch_completed) as second:
        member = enqueue(jobs.noop, 2, after=[first.on_complete])  # allowed: one way only
    with pytest.raises(DependencyCycle) as refused:
        enqueue(jobs.noop, 3, batch=first, after=[second.on_complete])
    message = str(refused.value)
    assert f"batch {first.pk} would never finish" in message
    assert f"callback of batch {second.pk}" in message
    assert f"job {member.pk} (of batch {second.pk})" in message


def test_waiting_for_another_batchs_callback_or_its_own_batchs_jobs_is_allowed(record_file):
    with batch(on_complete=jobs.batch_completed) as first:
        enqueue(jobs.record, "a")
    with batch(description="second", on_complete=jobs.batch_completed) as second:
        one = enqueue(jobs.record, "b", after=[first.on_complete])
        enqueue(jobs.record, "c", after=[one])
    enqueue(jobs.record, "d", after=[second.on_complete])
    run_jobs()
    assert record_file.read_text().split()[-2:] == ["complete:second:2:2:0", "d"]
