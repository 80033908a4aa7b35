"""manage.py dbjobs_import_tasks_db: django-tasks-db's READY rows become jobs, batch by batch.

Every test runs with real transactions: the command commits each batch itself, and the
source table is made with DDL, which MySQL commits at once.
"""

import datetime
import io
import threading
import time
import uuid

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_dbjobs import db, prepare
from django_dbjobs.enqueuing import wakeup
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.operations.tasks_db_import import job_id
from tests.tasks_db_models import NO_RUN_AFTER, DBTaskResult, HexIdDBTaskResult
from tests.tasks_helpers import tasks_or_skip

pytestmark = pytest.mark.django_db(transaction=True)


def create_table(model):
    with connection.schema_editor() as editor:
        editor.create_model(model)


def drop_table(model):
    with connection.schema_editor() as editor:
        editor.delete_model(model)


@pytest.fixture
def source(transactional_db):
    """django-tasks-db's table, as its migrations leave it; dropped after the test."""
    create_table(DBTaskResult)
    yield DBTaskResult
    drop_table(DBTaskResult)


@pytest.fixture
def hex_source(transactional_db):
    create_table(HexIdDBTaskResult)
    yield HexIdDBTaskResult
    drop_table(HexIdDBTaskResult)


def add_row(model=DBTaskResult, path="tests.jobs.add", args=(1, 2), kwargs=None, enqueued_at=None, **fields):
    """Store a task as django-tasks-db's backend does; `fields` override its columns."""
    values = {
        "args_kwargs": {"args": list(args), "kwargs": kwargs or {}},
        "task_path": path,
        "backend_name": "default",
        "run_after": NO_RUN_AFTER,
        **fields,
    }
    if model is HexIdDBTaskResult:
        values.setdefault("id", uuid.uuid4().hex)
    row = model.objects.create(**values)
    if enqueued_at is not None:  # auto_now_add ignores a value given to create()
        model.objects.filter(pk=row.pk).update(enqueued_at=enqueued_at)
        row.refresh_from_db()
    return row


def run(*args):
    out = io.StringIO()
    call_command("dbjobs_import_tasks_db", *args, stdout=out)
    return out.getvalue()


def test_dry_run_reports_and_writes_nothing(source):
    add_row(path="tests.jobs.add")
    add_row(path="tests.jobs.add")
    add_row(path="tests.jobs.echo", args=(), queue_name="emails")
    gone = add_row(path="tests.jobs.not_registered", args=(1,))
    output = run()
    assert "  tests.jobs.add  queue=default  2" in output
    assert "  tests.jobs.echo  queue=emails  1" in output
    assert f"tests.jobs.not_registered: 1 row (e.g. {gone.pk}): 'tests.jobs.not_registered' is not" in output
    assert output.rstrip().endswith(
        "Would move 3 jobs (1 batch); 1 row cannot be moved (see above). "
        "Dry run: run again with --commit to move."
    )
    assert Job.objects.count() == 0
    assert source.objects.count() == 4


def test_commit_moves_ready_rows_with_their_fields_and_ids(source):
    enqueued = timezone.now() - datetime.timedelta(days=2)
    later = timezone.now() + datetime.timedelta(hours=3)
    deferred = add_row(
        path="tests.jobs.echo",
        args=(1, "two"),
        kwargs={"three": [3]},
        priority=-7,
        queue_name="emails",
        run_after=later,
        enqueued_at=enqueued,
    )
    due = add_row(path="tests.jobs.add", args=(2, 3), priority=100, enqueued_at=enqueued)
    before = wakeup.generation()

    output = run("--commit")

    assert output.rstrip().endswith("Moved 2 jobs (1 batch).")
    assert source.objects.count() == 0
    echo = Job.objects.get(pk=str(deferred.pk))
    assert (echo.name, echo.args, echo.kwargs) == ("tests.jobs.echo", [1, "two"], {"three": [3]})
    assert (echo.queue, echo.priority, echo.run_at, echo.enqueued_at) == ("emails", -7, later, enqueued)
    assert (echo.status, echo.attempts, echo.max_attempts) == (JobStatus.READY, 0, 3)
    add = Job.objects.get(pk=str(due.pk))
    assert len(add.pk) == 36
    assert (add.name, add.args, add.kwargs, add.priority) == ("tests.jobs.add", [2, 3], {}, 100)
    # No run_after: due since it was enqueued, so older tasks keep running first.
    assert add.run_at == add.enqueued_at == enqueued
    assert wakeup.generation() > before, "workers are woken once the batch commits"


def test_rows_that_are_not_ready_stay_where_they_are(source):
    for status in ("RUNNING", "SUCCESSFUL", "FAILED"):
        add_row(status=status)
    output = run("--commit")
    assert output.rstrip().endswith("Moved 0 jobs (0 batches).")
    assert sorted(source.objects.values_list("status", flat=True)) == ["FAILED", "RUNNING", "SUCCESSFUL"]
    assert Job.objects.count() == 0


def test_rows_that_cannot_be_jobs_are_reported_and_left(source):
    unregistered = add_row(path="tests.jobs.not_registered", args=(1,))
    wrong_arguments = add_row(path="tests.jobs.add", args=(1,))
    bad_queue = add_row(queue_name="no spaces allowed")
    not_args_kwargs = add_row(args_kwargs=["not", "a", "dict"])
    fine = add_row()

    output = run("--commit")

    assert f"(e.g. {unregistered.pk}): 'tests.jobs.not_registered' is not a registered job" in output
    assert f"(e.g. {wrong_arguments.pk}): The arguments do not fit tests.jobs.add(a, b)" in output
    assert f"(e.g. {bad_queue.pk}): queue must be 1 to 100 letters" in output
    assert f"(e.g. {not_args_kwargs.pk}): args_kwargs is not" in output
    assert output.rstrip().endswith("Moved 1 job (1 batch); 4 rows cannot be moved (see above).")
    assert list(Job.objects.values_list("pk", flat=True)) == [str(fine.pk)]
    left = set(source.objects.values_list("pk", flat=True))
    assert left == {unregistered.pk, wrong_arguments.pk, bad_queue.pk, not_args_kwargs.pk}
    assert set(source.objects.values_list("status", flat=True)) == {"READY"}


def test_a_row_already_moved_is_deleted_and_not_duplicated(source):
    row = add_row(args=(1, 2))
    other = add_row(args=(5, 5))
    # A job with the row's id, as left by a run that stopped between insert and delete.
    existing = prepare("tests.jobs.add", 3, 4)
    existing.id = str(row.pk)
    existing.save(force_insert=True)

    output = run("--commit")

    assert (
        f"Already jobs (moved by an earlier run): 1 row, deleted from {source._meta.db_table} only." in output
    )
    assert output.rstrip().endswith("Moved 1 job (1 batch).")
    assert source.objects.count() == 0
    assert dict(Job.objects.values_list("pk", "args")) == {str(row.pk): [3, 4], str(other.pk): [5, 5]}


def test_a_second_run_moves_nothing(source):
    for _ in range(3):
        add_row()
    add_row(path="tests.jobs.not_registered", args=(1,))
    assert "Moved 3 jobs" in run("--commit")
    output = run("--commit")
    assert output.rstrip().endswith("Moved 0 jobs (1 batch); 1 row cannot be moved (see above).")
    assert Job.objects.count() == 3 and source.objects.count() == 1


def test_each_batch_is_its_own_insert_and_delete(source):
    rows = [add_row(args=(n, n)) for n in range(5)]
    with CaptureQueriesContext(connection) as queries:
        output = run("--commit", "--batch-size", "2")
    assert output.rstrip().endswith("Moved 5 jobs (3 batches).")
    statements = [q["sql"] for q in queries.captured_queries]
    table = connection.ops.quote_name(source._meta.db_table)
    # The last batch is short, so no fourth SELECT looks for more.
    assert sum(sql.startswith("SELECT") and f"FROM {table} WHERE" in sql for sql in statements) == 3
    assert sum(sql.startswith("INSERT INTO") for sql in statements) == 3
    # The debug cursor logs an executemany() as "<n> times: DELETE ...".
    assert [sql.split(": ")[0] for sql in statements if "DELETE FROM" in sql] == [
        "2 times",
        "2 times",
        "1 times",
    ]
    assert sorted(Job.objects.values_list("pk", flat=True)) == sorted(str(row.pk) for row in rows)
    assert source.objects.count() == 0


def test_dry_run_counts_the_batches_a_commit_takes(source):
    for n in range(4):
        add_row(args=(n, n))
    assert run("--batch-size", "2").rstrip().startswith("Would move, by task path and queue:")
    assert "Would move 4 jobs (2 batches)." in run("--batch-size", "2")
    assert "Would move 4 jobs (1 batch)." in run("--batch-size", "4")


def test_queue_option_moves_only_those_queues(source):
    add_row(queue_name="default")
    emails = add_row(queue_name="emails")
    reports = add_row(queue_name="reports")
    output = run("--commit", "--queues", "emails,reports")
    assert output.rstrip().endswith("Moved 2 jobs (1 batch).")
    assert dict(Job.objects.values_list("pk", "queue")) == {
        str(emails.pk): "emails",
        str(reports.pk): "reports",
    }
    assert list(source.objects.values_list("queue_name", flat=True)) == ["default"]


def test_a_missing_table_is_a_command_error(transactional_db):
    with pytest.raises(
        CommandError, match="has no table 'django_tasks_database_dbtaskresult' to import from"
    ):
        run()
    with pytest.raises(CommandError, match="has no table 'elsewhere'"):
        run("--table", "elsewhere", "--commit")


def test_a_table_without_django_tasks_db_columns_is_a_command_error(transactional_db):
    with pytest.raises(
        CommandError, match="has no column task_path, queue_name, args_kwargs, run_after, so it is not"
    ):
        run("--table", Job._meta.db_table)


def test_ids_stored_as_32_hex_characters_are_moved_and_deleted(hex_source):
    rows = [add_row(HexIdDBTaskResult, args=(n, n)) for n in range(3)]
    output = run("--commit", "--batch-size", "2")
    assert output.rstrip().endswith("Moved 3 jobs (2 batches).")
    assert sorted(Job.objects.values_list("pk", flat=True)) == sorted(str(uuid.UUID(r.pk)) for r in rows)
    assert hex_source.objects.count() == 0


@pytest.mark.parametrize(
    "stored",
    [
        uuid.UUID("0b9e4f0c-6a43-4a8e-9d5e-4c1f6f0a7b21"),
        "0b9e4f0c6a434a8e9d5e4c1f6f0a7b21",
        "0b9e4f0c-6a43-4a8e-9d5e-4c1f6f0a7b21",
        "0B9E4F0C6A434A8E9D5E4C1F6F0A7B21",
    ],
)
def test_job_id_is_the_canonical_uuid_text(stored):
    assert job_id(stored) == "0b9e4f0c-6a43-4a8e-9d5e-4c1f6f0a7b21"


@pytest.mark.skipif(not db.can_skip_locked(), reason="SQLite has no row locks")
def test_rows_a_running_db_worker_holds_are_skipped_not_waited_for(source):
    claimed = add_row(args=(1, 1))
    free = [add_row(args=(n, n)) for n in range(3)]
    locked, release = threading.Event(), threading.Event()

    def db_worker():  # claims a row as django-tasks-db's worker does: SELECT ... FOR UPDATE SKIP LOCKED
        try:
            with transaction.atomic():
                source.objects.select_for_update(skip_locked=True).get(pk=claimed.pk)
                locked.set()
                release.wait(20)
        finally:
            connections.close_all()

    thread = threading.Thread(target=db_worker)
    thread.start()
    try:
        assert locked.wait(10)
        started = time.monotonic()
        output = run("--commit")
        took = time.monotonic() - started
    finally:
        release.set()
        thread.join()
    assert took < 10, "the import waited for the worker's lock"
    assert output.rstrip().endswith("Moved 3 jobs (1 batch).")
    assert sorted(Job.objects.values_list("pk", flat=True)) == sorted(str(row.pk) for row in free)
    assert list(source.objects.values_list("pk", flat=True)) == [claimed.pk]


def test_a_django_task_row_becomes_a_job_of_the_same_task(source):
    tasks = tasks_or_skip()
    row = add_row(path=tasks.send_welcome.module_path, args=(42,), queue_name="emails", priority=10)
    assert run("--commit").rstrip().endswith("Moved 1 job (1 batch).")
    job = Job.objects.get(pk=str(row.pk))
    assert (job.name, job.args, job.queue, job.priority) == ("tests.tasks.send_welcome", [42], "emails", 10)
