import datetime
import math

import pytest
from asgiref.sync import async_to_sync
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from django_dbjobs import aenqueue, bulk_enqueue, enqueue, enqueue_many, prepare
from django_dbjobs.enqueuing import wakeup
from django_dbjobs.exceptions import (
    InvalidJob,
    InvalidJobArguments,
    PayloadTooLarge,
    UnknownJob,
    UnknownOption,
)
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.signals import job_enqueued
from tests import jobs


@pytest.mark.django_db(transaction=True)
def test_commit_stores_job_and_wakes_workers_after_commit():
    before = wakeup.generation()
    with transaction.atomic():
        job = enqueue(jobs.add, 1, 2)
        assert wakeup.generation() == before, "woken before the commit"
    assert wakeup.generation() == before + 1
    stored = Job.objects.get(pk=job.pk)
    assert (stored.name, stored.args, stored.kwargs) == ("tests.jobs.add", [1, 2], {})
    assert stored.status == JobStatus.READY


@pytest.mark.django_db(transaction=True)
def test_rollback_discards_enqueued_job_and_wakes_nobody():
    before = wakeup.generation()
    with pytest.raises(RuntimeError), transaction.atomic():
        enqueue(jobs.add, 1, 2)
        raise RuntimeError("roll back")
    assert Job.objects.count() == 0
    assert wakeup.generation() == before


@pytest.mark.django_db(transaction=True)
def test_savepoint_rollback_discards_only_the_inner_job():
    before = wakeup.generation()
    with transaction.atomic():
        kept = enqueue(jobs.add, 1, 1)
        with pytest.raises(RuntimeError), transaction.atomic():
            enqueue(jobs.add, 2, 2)
            raise RuntimeError("roll back the savepoint")
    assert list(Job.objects.values_list("pk", flat=True)) == [kept.pk]
    assert wakeup.generation() == before + 1


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_job_commits_and_wakes_at_once():
    before = wakeup.generation()
    job = enqueue(jobs.add, 1, 2)
    assert wakeup.generation() == before + 1
    assert Job.objects.filter(pk=job.pk).exists()


@pytest.mark.django_db
def test_enqueue_accepts_function_wrapper_and_dotted_name():
    by_wrapper = enqueue(jobs.add, 1, 2)
    by_name = enqueue("tests.jobs.add", 3, 4)
    by_method = jobs.add.enqueue(5, 6)
    assert {j.name for j in (by_wrapper, by_name, by_method)} == {"tests.jobs.add"}


@pytest.mark.django_db
def test_job_keyword_arguments_are_never_taken_for_options():
    job = enqueue(jobs.echo, 1, kwargs={"queue": "not-an-option", "priority": "x"})
    job.refresh_from_db()
    assert job.kwargs == {"queue": "not-an-option", "priority": "x"}
    assert (job.queue, job.priority) == ("default", 0)
    with pytest.raises(TypeError, match=r"no option colour.*kwargs=\{'colour': \.\.\.\}"):
        enqueue(jobs.echo, 1, colour="red")


@pytest.mark.django_db
def test_registered_options_are_defaults_and_enqueue_overrides_them():
    default = enqueue(jobs.send_email, "a@example.com")
    assert (default.queue, default.priority, default.max_attempts) == ("emails", 5, 7)
    custom = enqueue(jobs.send_email, "b@example.com", queue="bulk", priority=-3, max_attempts=1)
    custom.refresh_from_db()
    assert (custom.queue, custom.priority, custom.max_attempts) == ("bulk", -3, 1)


@pytest.mark.django_db
def test_returned_job_carries_id_and_database_times():
    job = enqueue(jobs.add, 1, 2)
    assert len(job.pk) == 36 and job.pk[14] == "7"
    if connection.features.can_return_columns_from_insert:  # read back by the INSERT itself
        assert timezone.is_aware(job.run_at) and job.run_at == job.enqueued_at
        assert not job._state.adding
    stored = Job.objects.get(pk=job.pk)
    assert (stored.run_at, stored.enqueued_at) == (job.run_at, job.enqueued_at) or not (
        connection.features.can_return_columns_from_insert
    )
    job.refresh_from_db()
    assert job.run_at is not None and job.enqueued_at is not None
    assert abs((job.enqueued_at - timezone.now()).total_seconds()) < 60


@pytest.mark.django_db
def test_delay_and_run_at_defer_the_job():
    later = timezone.now() + datetime.timedelta(hours=1)
    by_time = enqueue(jobs.add, 1, 2, run_at=later)
    by_delay = enqueue(jobs.add, 1, 2, delay=3600)
    assert Job.objects.due().count() == 0
    by_time.refresh_from_db()
    by_delay.refresh_from_db()
    assert by_time.run_at == later
    assert abs((by_delay.run_at - later).total_seconds()) < 60


@pytest.mark.django_db
def test_enqueued_signal_is_sent_with_the_job():
    seen = []

    def receiver(sender, job, **kwargs):
        seen.append(job.pk)

    job_enqueued.connect(receiver)
    try:
        job = enqueue(jobs.add, 1, 2)
    finally:
        job_enqueued.disconnect(receiver)
    assert seen == [job.pk]


@pytest.mark.django_db(transaction=True)
def test_bulk_enqueue_stores_all_jobs_in_one_go():
    before = wakeup.generation()
    created = bulk_enqueue(prepare(jobs.add, i, i) for i in range(250))
    assert len(created) == 250
    assert Job.objects.count() == 250
    assert sorted(Job.objects.values_list("args", flat=True))[:2] == [[0, 0], [1, 1]]
    assert wakeup.generation() == before + 1


@pytest.mark.django_db
def test_bulk_enqueue_validates_everything_before_writing():
    with pytest.raises(InvalidJobArguments):
        bulk_enqueue([prepare(jobs.add, 1, 2), prepare(jobs.add, math.nan, 2)])
    assert Job.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_aenqueue_stores_the_job():
    job = async_to_sync(aenqueue)(jobs.add, 1, 2)
    assert Job.objects.get(pk=job.pk).args == [1, 2]


INVALID_CALLS = [
    pytest.param(lambda: enqueue(jobs.echo, math.nan), InvalidJobArguments, "args[0]", id="nan"),
    pytest.param(lambda: enqueue(jobs.echo, [1, math.inf]), InvalidJobArguments, "args[0][1]", id="inf"),
    pytest.param(lambda: enqueue(jobs.echo, {1: "a"}), InvalidJobArguments, "key 1", id="int-key"),
    pytest.param(lambda: enqueue(jobs.echo, object()), InvalidJobArguments, "args[0]", id="object"),
    pytest.param(
        lambda: enqueue(jobs.echo, kwargs={"when": datetime.date(2026, 1, 1)}),
        InvalidJobArguments,
        "kwargs['when']",
        id="date",
    ),
    pytest.param(lambda: enqueue(jobs.echo, kwargs={"1x": 1}), InvalidJobArguments, "'1x'", id="bad-kwarg"),
    pytest.param(lambda: enqueue(jobs.echo, "x" * 2000), PayloadTooLarge, "1000", id="too-large"),
    pytest.param(lambda: enqueue(jobs.not_registered, 1), UnknownJob, "not_registered", id="unregistered"),
    pytest.param(lambda: enqueue("os.system", "ls"), UnknownJob, "os.system", id="os-system"),
    pytest.param(lambda: enqueue(jobs.add, 1, 2, priority=101), InvalidJob, "priority", id="priority-high"),
    pytest.param(lambda: enqueue(jobs.add, 1, 2, priority=-101), InvalidJob, "priority", id="priority-low"),
    pytest.param(lambda: enqueue(jobs.add, 1, 2, priority=1.5), InvalidJob, "priority", id="priority-float"),
    pytest.param(lambda: enqueue(jobs.add, 1, 2, priority=True), InvalidJob, "priority", id="priority-bool"),
    pytest.param(
        lambda: enqueue(jobs.add, 1, 2, run_at=datetime.datetime(2030, 1, 1)),
        InvalidJob,
        "naive",
        id="naive-run-at",
    ),
    pytest.param(lambda: enqueue(jobs.add, 1, 2, run_at="tomorrow"), InvalidJob, "run_at", id="run-at-str"),
    pytest.param(lambda: enqueue(jobs.add, 1, 2, delay=-1), InvalidJob, "delay", id="negative-delay"),
    pytest.param(
        lambda: enqueue(jobs.add, 1, 2, delay=1, run_at=timezone.now()),
        InvalidJob,
        "not both",
        id="both",
    ),
    pytest.param(lambda: enqueue(jobs.add, 1, 2, queue="no spaces"), InvalidJob, "queue", id="queue-name"),
    pytest.param(
        lambda: enqueue(jobs.add, 1, 2, queue="other"), InvalidJob, "DBJOBS_QUEUES", id="queue-unknown"
    ),
    pytest.param(lambda: enqueue(jobs.add, 1, 2, max_attempts=0), InvalidJob, "max_attempts", id="attempts"),
    pytest.param(
        lambda: enqueue(jobs.echo, "a\ud800b"), InvalidJobArguments, "lone surrogate", id="surrogate"
    ),
    pytest.param(
        lambda: enqueue(jobs.echo, kwargs={"k": {"\udcff": 1}}),
        InvalidJobArguments,
        "kwargs['k'] key",
        id="surrogate-key",
    ),
    pytest.param(
        lambda: enqueue(jobs.add, 1), InvalidJobArguments, "missing a required argument: 'b'", id="missing"
    ),
    pytest.param(
        lambda: enqueue(jobs.add, 1, 2, kwargs={"c": 3}),
        InvalidJobArguments,
        "tests.jobs.add(a, b): got an unexpected keyword argument 'c'",
        id="unknown-kwarg",
    ),
    pytest.param(
        lambda: enqueue(jobs.add, 1, 2, 3), InvalidJobArguments, "too many positional", id="too-many"
    ),
    pytest.param(
        lambda: enqueue_many(jobs.add, [(1, 2), (1,)]), InvalidJobArguments, "arguments[1]", id="many-missing"
    ),
    pytest.param(lambda: enqueue(jobs.echo, {1, 2}), InvalidJobArguments, "is a set", id="a-set"),
    pytest.param(lambda: enqueue(jobs.echo, Order()), InvalidJobArguments, "is an Order", id="an-order"),
    pytest.param(
        lambda: enqueue(jobs.echo, {"k" * 500: object()}),
        InvalidJobArguments,
        "args[0]['kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk...'] is an object",
        id="long-key-shortened",
    ),
    pytest.param(
        lambda: enqueue(jobs.add, 1, amount="5"),
        UnknownOption,
        "enqueue() has no option amount. The job's own keyword arguments go in kwargs={...}: "
        "enqueue(job, 1, kwargs={'amount': ...})",
        id="kwarg-as-option",
    ),
]


class Order:
    """Something that is not JSON data, with a name that takes 'an'."""


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("call, error, mentions", INVALID_CALLS)
@override_settings(DBJOBS_MAX_PAYLOAD_BYTES=1000, DBJOBS_QUEUES=["default", "emails"])
def test_invalid_input_raises_writes_nothing_and_leaves_transaction_usable(call, error, mentions):
    with transaction.atomic():
        with pytest.raises(error) as raised:
            call()
        assert mentions in str(raised.value)
        enqueue(jobs.add, 1, 2)  # the caller's transaction still works
    assert list(Job.objects.values_list("name", flat=True)) == ["tests.jobs.add"]


@pytest.mark.django_db(transaction=True)
def test_nul_character_is_rejected_where_the_database_cannot_store_it():
    if connection.vendor == "postgresql":
        with transaction.atomic():
            with pytest.raises(InvalidJobArguments, match="NUL"):
                enqueue(jobs.echo, "a\x00b")
            enqueue(jobs.add, 1, 2)
        assert Job.objects.count() == 1
    else:
        job = enqueue(jobs.echo, "a\x00b")
        job.refresh_from_db()
        assert job.args == ["a\x00b"]


@pytest.mark.django_db(transaction=True)
def test_enqueue_raises_when_the_row_cannot_be_stored():
    from django.db import OperationalError, connections

    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no server connection to lose")
    with connection.cursor() as cursor:  # make our own session die, as in an outage
        try:
            if connection.vendor == "postgresql":
                cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
            else:
                cursor.execute("KILL CONNECTION_ID()")
        except Exception:
            pass
    with pytest.raises(OperationalError):
        enqueue(jobs.add, 1, 2)
    connections.close_all()
    assert Job.objects.count() == 0


@pytest.mark.django_db
def test_save_signals_of_job_still_fire_for_those_who_listen():
    from django.db.models.signals import post_save

    saved = []

    def receiver(sender, instance, created, **kwargs):
        saved.append((instance.pk, created))

    post_save.connect(receiver, sender=Job)
    try:
        job = enqueue(jobs.add, 1, 2)
    finally:
        post_save.disconnect(receiver, sender=Job)
    assert saved == [(job.pk, True)]
