"""resumable() and aresumable() with testing.run_jobs(): where a walk carries on after a stop or a failure."""

import collections

import pytest
from django.contrib.auth.models import User

from django_dbjobs import aresumable, enqueue, resumable
from django_dbjobs.models import JobStatus
from django_dbjobs.models.long_work import stopping_workers
from django_dbjobs.testing import TEST_WORKER, run_jobs
from tests import resumable_jobs

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def not_stopping():
    yield
    stopping_workers.discard(TEST_WORKER)


def recorded(record_file) -> list[str]:
    return record_file.read_text().split()


def make_users(count: int) -> list[str]:
    names = [f"{resumable_jobs.USER_PREFIX}{n:04}" for n in range(count)]
    User.objects.bulk_create(User(username=name, first_name="same") for name in names)
    return names


def test_a_list_walk_asked_to_stop_hands_back_after_the_item_in_hand_and_carries_on(record_file):
    job = enqueue(resumable_jobs.walk_recorded, "list", kwargs={"count": 1000, "every": 100, "stop_at": 250})
    runs = run_jobs()
    assert [run.status for run in runs] == [JobStatus.READY, JobStatus.SUCCESSFUL]
    assert runs[0].resume == {"done": 250} and runs[0].attempts == 0, "stored at the stop, not at 200"
    assert recorded(record_file) == [str(n) for n in range(1000)], "every item once, in order"
    job.refresh_from_db()
    assert (job.attempts, job.pickups, job.return_value, job.resume) == (1, 2, 750, {"done": 1000})
    assert (job.progress.done, job.progress.total) == (1000, 1000)


def test_a_queryset_walk_goes_by_primary_key_and_carries_on_after_the_last_key_done(record_file):
    names = make_users(300)
    job = enqueue(resumable_jobs.walk_recorded, "users", kwargs={"every": 50, "stop_at": 120})
    runs = run_jobs()
    assert [run.status for run in runs] == [JobStatus.READY, JobStatus.SUCCESSFUL]
    hundred_twentieth = User.objects.get(username=names[119])
    assert runs[0].resume == {"done": 120, "after": hundred_twentieth.pk}
    assert recorded(record_file) == names
    job.refresh_from_db()
    assert job.return_value == 180 and job.resume["done"] == 300


def test_a_queryset_walk_by_another_unique_key(record_file):
    names = make_users(30)
    User.objects.filter(username=names[0]).update(username="walk-zzz")  # last by name, first by pk
    enqueue(resumable_jobs.walk_recorded, "users", kwargs={"every": 7, "key": "username", "stop_at": 10})
    run_jobs()
    assert recorded(record_file) == [*names[1:], "walk-zzz"]


def test_a_failed_attempt_redoes_only_the_items_since_the_last_checkpoint(record_file):
    job = enqueue(resumable_jobs.walk_recorded, "list", kwargs={"count": 400, "every": 100, "fail_at": 251})
    run_jobs(include_scheduled=True)
    job.refresh_from_db()
    assert (job.status, job.attempts, job.return_value) == (JobStatus.SUCCESSFUL, 2, 200)
    counts = collections.Counter(recorded(record_file))
    twice = sorted((int(item) for item, seen in counts.items() if seen == 2))
    assert twice == list(range(200, 251)) and set(counts.values()) == {1, 2}


def test_the_place_is_also_stored_every_so_many_seconds(record_file):
    job = enqueue(
        resumable_jobs.walk_recorded,
        "list",
        kwargs={"count": 40, "every": 10**6, "seconds": 0.05, "fail_at": 30, "item_seconds": 0.01},
    )
    run_jobs(include_scheduled=True)
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCESSFUL
    redone = 40 - job.return_value  # where the retry started
    assert 20 <= redone < 30, f"the retry started at item {redone}: no checkpoint by time"


def test_a_walk_whose_job_was_taken_away_stops_at_the_checkpoint_it_cannot_store(record_file):
    job = enqueue(resumable_jobs.walk_recorded, "list", kwargs={"count": 500, "every": 100, "lose_at": 130})
    # In a worker the fence then drops the attempt's outcome; run_jobs() rolls the job's own
    # writes back (its savepoint), the taking away with them, and stores the failure.
    run_jobs(include_scheduled=True)
    expected = [*range(200), *range(100, 500)]  # stopped at 200, carried on from the one at 100
    assert recorded(record_file) == [str(n) for n in expected]
    job.refresh_from_db()
    assert (job.status, job.attempts, job.return_value) == (JobStatus.SUCCESSFUL, 2, 400)
    assert "JobInterrupted: this worker no longer owns the job" in job.errors[0]["summary"]


def test_an_async_job_walks_with_aresumable(record_file):
    names = make_users(60)
    users = enqueue(resumable_jobs.awalk_recorded, "users", 60, 25, kwargs={"stop_at": 33})
    runs = run_jobs()
    assert [run.status for run in runs] == [JobStatus.READY, JobStatus.SUCCESSFUL]
    assert runs[0].resume["done"] == 33
    listed = enqueue(resumable_jobs.awalk_recorded, "list", 50, 20, kwargs={"stop_at": 5})
    runs = run_jobs()
    assert [run.status for run in runs] == [JobStatus.READY, JobStatus.SUCCESSFUL]
    assert runs[0].resume == {"done": 5}
    assert recorded(record_file) == [*names, *map(str, range(50))]
    for job, walked in [(users, 27), (listed, 45)]:
        job.refresh_from_db()
        assert (job.return_value, job.attempts) == (walked, 1)


def test_an_empty_walk_stores_nothing(record_file):
    job = enqueue(resumable_jobs.walk_recorded, "users")
    run_jobs()
    job.refresh_from_db()
    assert (job.status, job.return_value, job.resume) == (JobStatus.SUCCESSFUL, 0, None)


@pytest.mark.parametrize(
    "kind, error",
    [
        ("key not unique", "ValueError: resumable() key='first_name': auth.User.first_name is not unique"),
        ("no such key", "ValueError: resumable() key='nope': auth.User has no field 'nope'"),
        ("other order", "ValueError: resumable() walks the QuerySet in the order of its key ('pk')"),
        ("sliced", "ValueError: resumable() cannot walk a sliced QuerySet"),
        (
            "generator",
            "TypeError: resumable() takes a QuerySet or a sequence (a list, a tuple, a range), "
            "not a generator",
        ),
        (
            "string",
            "TypeError: resumable() takes a QuerySet or a sequence (a list, a tuple, a range), not a str",
        ),
        ("key for a list", "TypeError: resumable() takes key= for a QuerySet only"),
        ("every", "ValueError: resumable() takes every= as a whole number of items, 1 or more; got 0"),
        ("seconds", "ValueError: resumable() takes seconds= as a number of seconds above 0; got 0"),
        (
            "foreign checkpoint",
            "ValueError: resumable() cannot carry on from this job's checkpoint {'page': 3}",
        ),
    ],
)
def test_what_resumable_cannot_walk_is_refused_clearly(kind, error):
    job = enqueue(resumable_jobs.resumable_refused, kind)
    run_jobs()
    job.refresh_from_db()
    assert job.return_value.startswith(error), job.return_value


def test_resumable_outside_a_running_job_is_refused():
    with pytest.raises(RuntimeError, match="resumable\\(\\) is for a job's own code while it runs"):
        resumable([1, 2])
    with pytest.raises(RuntimeError, match="resumable\\(\\) is for a job's own code while it runs"):
        aresumable([1, 2])
