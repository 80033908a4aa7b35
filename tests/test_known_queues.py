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
