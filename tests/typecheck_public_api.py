"""What a type checker sees of the public API (checked by ``make typecheck``, never run)."""

from typing_extensions import assert_type

from django_dbjobs import (
    JobFunction,
    aenqueue,
    after,
    batch,
    current_job,
    enqueue,
    enqueue_many,
    job,
    prepare,
)
from django_dbjobs.models import Batch, Job
from django_dbjobs.testing import CapturedJobs, capture_jobs, run_jobs


@job
def plain(x: int) -> int:
    return x


@job(queue="emails", max_attempts=5)
def configured(x: int) -> int:
    return x


async def from_async() -> None:
    assert_type(await aenqueue(plain, 1), Job)
    assert_type(await plain.aenqueue(1), Job)


assert_type(plain, JobFunction)
assert_type(configured, JobFunction)
assert_type(enqueue(plain, 1, queue="emails", delay=5), Job)
assert_type(enqueue("shop.jobs.plain", 1), Job)
assert_type(plain.enqueue(1), Job)
assert_type(enqueue_many(plain, [(1,), (2,)]), list[Job])
assert_type(enqueue_many(plain, [(1,)], priority=3, batch_size=10), list[Job])
assert_type(prepare(plain, 1, queue="emails", unique_key="k"), Job)
assert_type(plain.enqueue(1, kwargs={}, after_failure="run"), Job)
assert_type(current_job(), Job | None)
assert_type(run_jobs(["emails"], include_scheduled=True), list[Job])
with capture_jobs() as captured:
    assert_type(captured, CapturedJobs)
    assert_type(captured.names, list[str])
with batch(on_complete=configured) as opened:
    assert_type(opened, Batch)
with after(opened):
    pass

# Misuses a user's type checker must report (warn_unused_ignores: should one pass, the
# ignore is unused and the check fails).
enqueue(plain, 1, prioirty=1)  # type: ignore[call-arg]
enqueue(plain, 1, queue=5)  # type: ignore[arg-type]
enqueue_many(plain, [(1,)], unique_key="k")  # type: ignore[call-arg]
