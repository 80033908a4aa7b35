import dataclasses
import datetime
import typing

import pytest
from django.test import override_settings
from django.utils import timezone

from django_dbjobs import enqueue, enqueue_many, prepare
from django_dbjobs.enqueuing import spec as spec_module
from django_dbjobs.enqueuing import validation
from django_dbjobs.enqueuing.spec import (
    ENQUEUE_MANY_OPTIONS,
    ENQUEUE_OPTIONS,
    PREPARE_OPTIONS,
    EnqueueOptions,
    JobSpec,
)
from django_dbjobs.exceptions import InvalidJob, UnknownOption
from django_dbjobs.models import Job
from django_dbjobs.registry import resolve
from tests import jobs


def test_a_spec_is_frozen():
    spec = JobSpec(queue="emails")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.queue = "bulk"


def test_a_spec_takes_keywords_only():
    with pytest.raises(TypeError):
        JobSpec("emails")


def test_a_spec_is_a_value():
    assert JobSpec(queue="a", priority=1) == JobSpec(priority=1, queue="a")
    assert hash(JobSpec(queue="a")) == hash(JobSpec(queue="a"))


def test_enqueue_options_are_the_spec_fields_but_the_internal_ones_with_the_same_types():
    fields = typing.get_type_hints(JobSpec)
    assert set(fields) - ENQUEUE_OPTIONS == {"capture_context", "trace_context"}
    assert {name: fields[name] for name in ENQUEUE_OPTIONS} == typing.get_type_hints(EnqueueOptions)
    assert PREPARE_OPTIONS == ENQUEUE_OPTIONS - {"batch", "after", "after_failure"}
    assert ENQUEUE_MANY_OPTIONS == ENQUEUE_OPTIONS - {"unique_key", "concurrency_key", "concurrency_limit"}


def test_no_option_is_the_one_default_spec():
    assert JobSpec.of("enqueue", (), {}, ENQUEUE_OPTIONS) is spec_module.DEFAULT_SPEC


@pytest.mark.parametrize(
    ("function", "allowed", "option"),
    [
        ("enqueue", ENQUEUE_OPTIONS, "capture_context"),
        ("enqueue", ENQUEUE_OPTIONS, "trace_context"),
        ("prepare", PREPARE_OPTIONS, "batch"),
        ("enqueue_many", ENQUEUE_MANY_OPTIONS, "unique_key"),
    ],
)
def test_an_option_the_function_does_not_take_is_refused(function, allowed, option):
    with pytest.raises(UnknownOption, match=rf"^{function}\(\) has no option {option}\. "):
        JobSpec.of(function, (1,), {option: True}, allowed)


def test_enqueue_many_says_what_to_use_instead_of_an_option_it_does_not_take():
    with pytest.raises(
        UnknownOption, match=r"^enqueue_many\(\) has no option unique_key\. .* use enqueue\(\)"
    ):
        enqueue_many(jobs.add, [(1, 2)], unique_key="k")


def test_enqueue_many_sends_nobody_elsewhere_for_an_option_no_function_takes():
    with pytest.raises(UnknownOption) as raised:
        enqueue_many(jobs.add, [(1, 2)], prioirty=1)
    assert str(raised.value) == "enqueue_many() has no option prioirty."


def columns(spec, job=jobs.send_email):
    return spec.columns(resolve(job), ["a@example.com"], {}, reject_nul=False)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, ("emails", 5, 7)),  # the job's own over the settings'
        ({"queue": "bulk"}, ("bulk", 5, 7)),
        ({"priority": -3, "max_attempts": 1}, ("emails", -3, 1)),
    ],
)
def test_the_caller_wins_over_the_job_and_the_job_over_the_settings(given, expected):
    with override_settings(
        DBJOBS_DEFAULT_QUEUE="other", DBJOBS_DEFAULT_PRIORITY=9, DBJOBS_DEFAULT_MAX_ATTEMPTS=2
    ):
        found = columns(JobSpec(**given))
    assert (found["queue"], found["priority"], found["max_attempts"]) == expected


def test_the_settings_fill_in_what_neither_the_caller_nor_the_job_gives():
    with override_settings(
        DBJOBS_DEFAULT_QUEUE="other", DBJOBS_DEFAULT_PRIORITY=9, DBJOBS_DEFAULT_MAX_ATTEMPTS=2
    ):
        found = columns(JobSpec(), jobs.add)
    assert (found["queue"], found["priority"], found["max_attempts"]) == ("other", 9, 2)


def test_columns_hold_only_what_the_spec_sets():
    when = timezone.now() + datetime.timedelta(hours=1)
    found = columns(JobSpec(run_at=when, unique_key="k", capture_context=False))
    assert found == {
        "queue": "emails",
        "priority": 5,
        "max_attempts": 7,
        "unique_key": "k",
        "active_key": "k",
        "run_at": when,
    }


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"priority": 500}, "priority must be between -100 and 100, not 500."),
        ({"priority": True}, "priority must be an integer, not True."),
        ({"max_attempts": 0}, "max_attempts must be a positive integer, not 0."),
        ({"queue": "no spaces"}, "queue"),
        ({"delay": -1}, "delay must be zero or more seconds, not -1."),
        ({"run_at": datetime.datetime(2030, 1, 1)}, "run_at must be timezone-aware"),
        ({"unique_key": ""}, "unique_key must be a string of 1 to 200 characters, not ''."),
        ({"concurrency_limit": 2}, "concurrency_limit needs a concurrency_key"),
    ],
)
@pytest.mark.django_db
def test_an_invalid_option_is_refused_with_its_reason_and_nothing_is_written(given, message):
    with pytest.raises(InvalidJob, match=message.replace("(", r"\(").replace(")", r"\)")):
        columns(JobSpec(**given))
    with pytest.raises(InvalidJob, match=message.replace("(", r"\(").replace(")", r"\)")):
        enqueue(jobs.send_email, "a@example.com", **given)
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_enqueue_many_validates_its_options_once_for_all_its_jobs(monkeypatch):
    calls = []
    real = validation.priority
    monkeypatch.setattr(validation, "priority", lambda value: calls.append(value) or real(value))
    spec_module._validated_defaults.clear()
    enqueue_many(jobs.add, [(1, 2), (3, 4), (5, 6)], priority=4)
    assert calls == [4]
    assert list(Job.objects.values_list("priority", flat=True)) == [4, 4, 4]


@pytest.mark.django_db
def test_the_validated_defaults_are_kept_per_job_and_options():
    spec_module._validated_defaults.clear()
    enqueue(jobs.add, 1, 2, priority=3)
    enqueue(jobs.add, 1, 2, priority=3)
    prepare(jobs.send_email, "a@example.com")
    assert len(spec_module._validated_defaults) == 2
