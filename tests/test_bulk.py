"""The fast INSERT paths: enqueue_many(), bulk_enqueue() and the one-row INSERT of enqueue()."""

import datetime
import math

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from django_dbjobs import bulk_enqueue, enqueue, enqueue_many, prepare
from django_dbjobs.enqueuing import wakeup
from django_dbjobs.exceptions import InvalidJob, InvalidJobArguments, PayloadTooLarge, UnknownJob
from django_dbjobs.models import Job, JobStatus
from tests import jobs

# Every column a job row has, compared between the fast paths and Model.save().
COLUMNS = [f.attname for f in Job._meta.concrete_fields if f.attname not in ("id", "run_at", "enqueued_at")]


def stored(job):
    return {name: value for name, value in Job.objects.filter(pk=job.pk).values(*COLUMNS).get().items()}


@pytest.mark.django_db
def test_fast_insert_writes_exactly_the_row_save_writes():
    fast = enqueue(jobs.echo, 1, "two", kwargs={"b": [3]}, queue="q1", priority=7, max_attempts=4)
    reference = prepare(jobs.echo, 1, "two", kwargs={"b": [3]}, queue="q1", priority=7, max_attempts=4)
    reference.save(force_insert=True)
    (many,) = enqueue_many(jobs.echo, [(1, "two")], queue="q1", priority=7, max_attempts=4)
    assert stored(fast) == stored(reference)
    assert stored(many) == {**stored(reference), "kwargs": {}}
    assert stored(fast)["status"] == JobStatus.READY and stored(fast)["errors"] == []


@pytest.mark.django_db(transaction=True)
def test_enqueue_many_stores_one_job_per_item_with_shared_options():
    before = wakeup.generation()
    later = timezone.now() + datetime.timedelta(hours=1)
    created = enqueue_many(jobs.add, [(i, i) for i in range(2500)], queue="bulk", priority=-5, run_at=later)
    assert len(created) == 2500 and len({job.pk for job in created}) == 2500
    assert wakeup.generation() == before + 1, "one wake for the whole batch"
    rows = list(Job.objects.order_by("id").values_list("id", "args", "queue", "priority", "run_at"))
    assert [row[0] for row in rows] == [job.pk for job in created], "ids in enqueue order"
    assert [row[1] for row in rows] == [[i, i] for i in range(2500)]
    assert {row[2:] for row in rows} == {("bulk", -5, later)}
    if connection.features.can_return_rows_from_bulk_insert:
        assert all(not job._state.adding and job.enqueued_at is not None for job in created)
        first = Job.objects.get(pk=created[0].pk)
        assert (created[0].run_at, created[0].enqueued_at) == (first.run_at, first.enqueued_at)


@pytest.mark.django_db
def test_enqueue_many_joins_the_callers_transaction():
    with pytest.raises(RuntimeError), transaction.atomic():
        enqueue_many(jobs.add, [(1, 2), (3, 4)])
        assert Job.objects.count() == 2
        raise RuntimeError("roll back")
    assert Job.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    "arguments, options, error",
    [
        ([(1, 2), (math.inf, 2)], {}, InvalidJobArguments),
        ([(1, 2), 3], {}, InvalidJobArguments),
        ([(1, 2), ("x" * 2_000_000,)], {}, PayloadTooLarge),
        ([(1, 2)], {"priority": 101}, InvalidJob),
        ([(1, 2)], {"queue": "no spaces"}, InvalidJob),
        ([(1, 2)], {"run_at": datetime.datetime(2030, 1, 1)}, InvalidJob),
    ],
)
def test_enqueue_many_validates_every_item_before_writing(arguments, options, error):
    with transaction.atomic():
        with pytest.raises(error):
            enqueue_many(jobs.add, arguments, **options)
        enqueue(jobs.add, 0, 0)  # the caller's transaction is still usable
    assert Job.objects.count() == 1


@pytest.mark.django_db
def test_enqueue_many_rejects_unregistered_jobs_and_takes_no_items():
    with pytest.raises(UnknownJob):
        enqueue_many("tests.jobs.not_there", [(1,)])
    assert enqueue_many(jobs.add, []) == []
    assert jobs.add.enqueue_many([(5, 6)])[0].args == [5, 6]
    assert Job.objects.count() == 1


@pytest.mark.django_db
def test_bulk_enqueue_honours_jobs_changed_after_prepare_and_mixed_shapes():
    later = timezone.now() + datetime.timedelta(minutes=5)
    plain = prepare(jobs.add, 1, 1)
    changed = prepare(jobs.add, 2, 2)
    changed.status = JobStatus.FAILED  # not what prepare() made: must still be stored as set
    changed.last_error = "set by hand"
    deferred = prepare(jobs.add, 3, 3, run_at=later)
    deferred_more = prepare(jobs.add, 5, 5, run_at=later + datetime.timedelta(days=1), priority=9)
    bulk_enqueue([plain, changed, deferred, prepare(jobs.add, 4, 4), deferred_more])
    rows = {
        row["args"][0]: row
        for row in Job.objects.values("args", "status", "last_error", "run_at", "priority")
    }
    assert rows[2]["status"] == JobStatus.FAILED and rows[2]["last_error"] == "set by hand"
    assert rows[1]["status"] == rows[4]["status"] == JobStatus.READY and rows[1]["last_error"] == ""
    assert rows[3]["run_at"] == later and rows[1]["run_at"] < later
    assert (rows[5]["run_at"], rows[5]["priority"]) == (later + datetime.timedelta(days=1), 9)
    assert deferred.run_at == later and plain.run_at == rows[1]["run_at"], "returned jobs carry their times"


@pytest.mark.django_db
def test_init_signal_listeners_still_see_every_job_made():
    from django.db.models.signals import post_init

    seen = []

    def receiver(sender, instance, **kwargs):
        seen.append(instance)

    post_init.connect(receiver, sender=Job)
    try:
        made = enqueue_many(jobs.add, [(1, 1), (2, 2)])
        one = enqueue(jobs.add, 3, 3)
    finally:
        post_init.disconnect(receiver, sender=Job)
    assert [job.args for job in seen[:3]] == [[1, 1], [2, 2], [3, 3]]
    assert seen[:2] == made and seen[2] is one


@pytest.mark.django_db
def test_enqueue_many_has_the_payload_limit_of_enqueue_and_stores_the_text_it_checked(settings):
    # [["xx...x"],{}] as compact JSON: 9 bytes around the string.
    settings.DBJOBS_MAX_PAYLOAD_BYTES = 110
    fits, over = "é" * 16 + "x" * 5, "x" * 102  # é is 6 bytes of JSON (\u00e9): 96 + 5 + 9 = 110
    enqueue(jobs.echo, fits)
    (many,) = enqueue_many(jobs.echo, [(fits,)])
    for call in (lambda: enqueue(jobs.echo, over), lambda: enqueue_many(jobs.echo, [(over,)])):
        with pytest.raises(PayloadTooLarge, match="111 bytes"):
            call()
    assert Job.objects.get(pk=many.pk).args == [fits] == many.args
    assert Job.objects.get(pk=many.pk).kwargs == {} == many.kwargs


@pytest.mark.django_db
def test_bulk_enqueue_stores_per_row_text_and_json_exactly_as_save_does():
    awkward = ['quote " and \\ and , and {x}', "é \u2603 \n 😀", ""]
    if connection.vendor != "postgresql":  # PostgreSQL refuses NUL in text
        awkward.append("before\x00after")  # SQLite's JSON functions would cut it: VALUES instead

    def make(n, text):
        job = prepare(jobs.echo, text, {"k": [text, None, 1.5]}, kwargs={"b": text}, queue=f"q-{n}")
        job.last_error = text  # a text column with the awkward values, one per row
        job.return_value = {"kept": [text, None]}  # a nullable JSON column set per row
        return job

    made = [make(n, text) for n, text in enumerate(awkward)]
    references = [make(n, text) for n, text in enumerate(awkward)]
    bulk_enqueue(made)
    for reference in references:
        reference.save(force_insert=True)
    for job, reference in zip(made, references, strict=True):
        assert stored(job) == stored(reference)
        assert stored(job)["last_error"] == job.last_error


@pytest.mark.django_db
def test_bulk_enqueue_refuses_a_missing_json_value_as_save_does():
    first, second = prepare(jobs.echo, 1), prepare(jobs.echo, 2)
    first.args = second.args = None  # one shape: a multi-row INSERT with per-row args
    first.kwargs = second.kwargs = {"x": 1}
    with pytest.raises(IntegrityError), transaction.atomic():
        bulk_enqueue([first, second])
    with pytest.raises(IntegrityError), transaction.atomic():
        third = prepare(jobs.echo, 3)
        third.args = None
        third.save(force_insert=True)
    assert Job.objects.count() == 0


@pytest.mark.django_db
def test_enqueue_many_splits_a_statement_whose_column_text_would_be_too_large(monkeypatch):
    from django_dbjobs.db import insert_rows

    statements = []
    monkeypatch.setattr(insert_rows, "MAX_ARRAY_TEXT", 40)  # a few jobs' arguments at most
    with connection.execute_wrapper(
        lambda execute, sql, *rest: statements.append(sql) or execute(sql, *rest)
    ):
        created = enqueue_many(jobs.echo, [(f"argument-{n:03}",) for n in range(25)])
    assert [job.args for job in Job.objects.order_by("pk")] == [[f"argument-{n:03}"] for n in range(25)]
    assert [job.args for job in created] == [[f"argument-{n:03}"] for n in range(25)]
    inserts_run = [sql for sql in statements if "INSERT INTO" in sql]
    if connection.vendor in ("postgresql", "sqlite"):
        assert len(inserts_run) > 1, "split into several statements"
    else:
        assert len(inserts_run) == 1  # one multi-row INSERT: no JSON array there


@pytest.mark.django_db
def test_every_path_stores_arguments_that_exact_lookups_find():
    enqueue(jobs.echo, 1, "two")
    prepare(jobs.echo, 1, "two").save(force_insert=True)
    enqueue_many(jobs.echo, [(1, "two"), (1, "two")])
    bulk_enqueue([prepare(jobs.echo, 1, "two"), prepare(jobs.echo, 1, "two", queue="other")])
    assert Job.objects.filter(args=[1, "two"]).count() == 6
    assert Job.objects.filter(args=[1, "two"], kwargs={}).count() == 6


@pytest.mark.django_db
def test_statements_are_worked_out_once():
    from django_dbjobs.db import insert_sql

    enqueue(jobs.echo, 1)
    enqueue_many(jobs.echo, [(1,), (2,)])
    known = dict(insert_sql._plans)
    enqueue(jobs.echo, 2)
    enqueue_many(jobs.echo, [(3,), (4,)])
    assert insert_sql._plans == known
    assert all(insert_sql._plans[key] is plan for key, plan in known.items())
