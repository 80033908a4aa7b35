"""The TaskContext our backend passes (backend/task_context.py): Django's, with the job's long-work extras."""

import dataclasses
import signal

import pytest

from django_dbjobs import testing
from django_dbjobs.models import Job, JobStatus
from tests.conftest import wait_for
from tests.tasks_helpers import tasks_or_skip

tasks = tasks_or_skip()

from django_dbjobs.backend import JobTaskContext, TaskResultStatus  # noqa: E402
from django_dbjobs.backend.compat import TaskContext  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    ("task_name", "note"), [("reports_progress", "task"), ("async_reports_progress", "async task")]
)
def test_a_task_reports_progress_and_checkpoints_through_its_context(task_name, note):
    result = getattr(tasks, task_name).enqueue(5)
    testing.run_jobs(raise_errors=True)
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    returned = result.return_value
    assert returned["job"] == result.id and returned["stored"] is True
    assert returned["resume"] == {"done": 5} and returned["done"] == 5
    job = Job.objects.get(pk=result.id)
    assert job.checkpoint_state == {"done": 5}
    assert (job.progress.done, job.progress.total, job.progress.note) == (5, 5, note)


def test_the_context_is_djangos_with_no_field_added():
    result = tasks.reports_progress.enqueue(1)
    tasks.kept_contexts.clear()
    kept = tasks.keeps_its_context.enqueue()
    testing.run_jobs(raise_errors=True)
    result.refresh()
    assert result.return_value["is_context"] is True and result.return_value["stopping"] is False
    (context,) = tasks.kept_contexts
    assert isinstance(context, TaskContext) and type(context) is JobTaskContext
    assert [f.name for f in dataclasses.fields(context)] == [f.name for f in dataclasses.fields(TaskContext)]
    assert not hasattr(context, "__dict__")  # slots, as Django's
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.task_result = None
    assert context.task_result.id == kept.id and context.attempt == 1
    # Its job's extras are for the task's own code while it runs, not afterwards.
    with pytest.raises(RuntimeError, match="while it runs"):
        context.progress(1)
    with pytest.raises(RuntimeError, match="while it runs"):
        context.checkpoint({"late": True})


def test_a_task_reporting_progress_in_a_real_worker_keeps_its_last_report(run_jobs):
    result = tasks.reports_progress.enqueue(300)
    worker = run_jobs()
    assert wait_for(lambda: Job.objects.get(pk=result.id).status == JobStatus.SUCCESSFUL, timeout=20)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    job = Job.objects.get(pk=result.id)
    assert (job.progress.done, job.progress.note, job.checkpoint_state) == (300, "task", {"done": 300})
