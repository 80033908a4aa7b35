"""run_jobs --queues: a name nothing uses is most likely a typo, and the worker says so."""

import logging

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from django_dbjobs import enqueue
from django_dbjobs.models import Job, Queue
from django_dbjobs.worker import Worker
from tests import jobs

pytestmark = pytest.mark.django_db(transaction=True)


def warnings_for(caplog, queues):
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="django_dbjobs"):
        Worker(queues=queues, burst=True).run()
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("Queue ")]


def test_a_queue_nothing_uses_is_warned_about_with_the_closest_name(caplog):
    (warning,) = warnings_for(caplog, ["emails", "emial"])
    assert warning.startswith("Queue 'emial' is not used by any registered job, schedule or setting")
    assert "Did you mean 'emails'?" in warning and "DBJOBS_QUEUES" in warning


def test_queues_the_code_settings_or_table_use_are_not_warned_about(caplog, settings):
    settings.DBJOBS_SCHEDULES = {"often": {"job": "tests.jobs.tick", "cron": "@hourly", "queue": "sync"}}
    enqueue(jobs.add, 1, 2, queue="adhoc")  # only a job in the table names it
    Queue.objects.pause(["quiet"], by="ops")
    queues = ["default", "emails", "sync", "adhoc", "quiet"]  # emails: @job(queue="emails")
    assert warnings_for(caplog, queues) == []
    assert Job.objects.filter(queue="adhoc").exists()


def test_with_dbjobs_queues_an_unknown_name_is_an_error(settings):
    settings.DBJOBS_QUEUES = ["default", "emails"]
    with pytest.raises(CommandError, match="queue 'emial' is not one of DBJOBS_QUEUES"):
        call_command("run_jobs", "--burst", "--queues", "emails,emial")


def test_run_jobs_processes_warns_once_not_once_per_child(run_jobs):
    supervisor = run_jobs("--processes", "2", "--burst", "--queues", "emails,emial")
    assert supervisor.wait(60) == 0, supervisor.output()
    assert supervisor.output().count("Queue 'emial' is not used") == 1, supervisor.output()


@pytest.fixture
def debug(settings):
    from django_dbjobs.enqueuing import unserved_queues

    settings.DEBUG = True
    unserved_queues.forget()
    yield
    unserved_queues.forget()


@pytest.mark.usefixtures("debug")
def test_in_debug_enqueue_on_a_queue_nothing_names_and_no_worker_serves_warns_once():
    from django.db import transaction

    from django_dbjobs.exceptions import UnservedQueueWarning

    with pytest.warns(UnservedQueueWarning, match="Queue 'emials' is named by no registered job") as seen:
        with transaction.atomic():
            enqueue(jobs.add, 1, 2, queue="emials")
            enqueue(jobs.add, 1, 2, queue="emials")  # once per queue
            enqueue(jobs.add, 1, 2, queue="emails")  # named by a job: never
    assert len(seen) == 1 and "Did you mean 'emails'?" in str(seen[0].message)
    assert seen[0].filename == __file__  # points at the caller
    assert Job.objects.filter(queue="emials").count() == 2  # stored all the same


@pytest.mark.usefixtures("debug")
def test_a_queue_a_live_worker_serves_is_not_warned_about(recwarn):
    from django_dbjobs.models import WorkerProcess

    WorkerProcess.objects.create(id="w1", hostname="h", pid=1, queues=[], concurrency=1)  # every queue
    enqueue(jobs.add, 1, 2, queue="reports")
    WorkerProcess.objects.all().delete()
    WorkerProcess.objects.create(id="w2", hostname="h", pid=1, queues=["exports"], concurrency=1)
    enqueue(jobs.add, 1, 2, queue="exports")
    assert not [w for w in recwarn if "is named by no registered job" in str(w.message)]


def test_without_debug_enqueue_never_looks(recwarn, settings):
    from django_dbjobs.enqueuing import unserved_queues

    unserved_queues.forget()
    enqueue(jobs.add, 1, 2, queue="emials")
    assert not [w for w in recwarn if "is named by no registered job" in str(w.message)]
