"""A 10,000-item resumable() job under real run_jobs workers: SIGTERM hands it back, kill -9 costs a chunk.

Each item is a line in a ledger file outside the database (and a short sleep), so what
ran twice is counted whatever the database kept. Test settings: heartbeat every 0.2 s,
timeout 1.5 s, sweep every 0.3 s.
"""

import collections
import signal
import time

import pytest
from django.contrib.auth.models import Group

from django_dbjobs import enqueue
from django_dbjobs.models import Job, JobStatus
from tests import resumable_jobs
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

ITEMS = 10_000
ITEM_SECONDS = 0.0005
EVERY = 200
GRACE = 30


def lines(ledger) -> list[str]:
    return ledger.read_text().split() if ledger.exists() else []


def test_sigterm_hands_the_job_back_uncharged_and_another_worker_carries_on(run_jobs, tmp_path):
    names = [f"{resumable_jobs.GROUP_PREFIX}{n:05}" for n in range(ITEMS)]
    Group.objects.bulk_create(Group(name=name) for name in names)
    ledger = tmp_path / "ledger.txt"
    job = enqueue(resumable_jobs.walk_groups, str(ledger), ITEM_SECONDS, EVERY)
    first = run_jobs("--shutdown-grace", str(GRACE))
    assert wait_for(lambda: len(lines(ledger)) >= 2000, 60), first.output()
    signalled = time.monotonic()
    first.signal()
    assert first.wait(timeout=GRACE) == 0, first.output()
    stopped_in = time.monotonic() - signalled
    print(f"stopped {stopped_in:.2f}s after SIGTERM")
    assert stopped_in < 5, f"took {stopped_in:.1f}s to stop: the job did not hand itself back"
    job.refresh_from_db()
    done = len(lines(ledger))
    assert 2000 <= done < ITEMS, "stopped mid-way"
    assert (job.status, job.attempts, job.pickups, job.worker, job.errors) == (
        JobStatus.READY,
        0,
        1,
        None,
        [],
    )
    last = Group.objects.get(name=names[done - 1])
    assert job.resume == {"done": done, "after": last.pk}, "its place: the last item it did"
    assert "Job handed back to resume later" in first.output()
    second = run_jobs("--burst")
    assert second.wait(timeout=120) == 0, second.output()
    job.refresh_from_db()
    assert (job.status, job.attempts, job.pickups, job.return_value) == (JobStatus.SUCCESSFUL, 1, 2, "walked")
    assert job.resume == {"done": ITEMS, "after": Group.objects.get(name=names[-1]).pk}
    ledger_lines = lines(ledger)
    assert sorted(set(ledger_lines)) == names, "every item done"
    twice = [name for name, seen in collections.Counter(ledger_lines).items() if seen > 1]
    assert twice == [], "SIGTERM stores the place after the item in hand: nothing runs twice"


def test_the_children_of_run_jobs_processes_hand_back_sync_and_async_walks(run_jobs, tmp_path):
    ledger = tmp_path / "ledger.txt"
    count = 3000
    walks = [
        enqueue(resumable_jobs.walk_range, str(ledger), count, ITEM_SECONDS, EVERY),
        enqueue(resumable_jobs.awalk_range, str(ledger), count, ITEM_SECONDS, EVERY),
    ]
    supervisor = run_jobs("--processes", "2", "--prefetch", "0", "--shutdown-grace", str(GRACE))

    def both_walking():
        walked = lines(ledger)
        return (
            sum(not line.startswith("a") for line in walked) >= 300
            and sum(line.startswith("a") for line in walked) >= 300
        )

    assert wait_for(both_walking, 60), supervisor.output()
    signalled = time.monotonic()
    supervisor.process.send_signal(signal.SIGTERM)  # forwarded to each child
    assert supervisor.wait(timeout=GRACE) == 0, supervisor.output()
    assert time.monotonic() - signalled < 5, supervisor.output()
    for job in walks:
        job.refresh_from_db()
        assert (job.status, job.attempts) == (JobStatus.READY, 0), job.name
        assert 0 < job.resume["done"] < count
    second = run_jobs("--burst", "--concurrency", "2")
    assert second.wait(timeout=120) == 0, second.output()
    walked = collections.Counter(lines(ledger))
    assert set(walked) == {*map(str, range(count)), *(f"a{n}" for n in range(count))}
    assert set(walked.values()) == {1}, "nothing done twice"
    for job in walks:
        job.refresh_from_db()
        assert (job.status, job.attempts, job.resume) == (JobStatus.SUCCESSFUL, 1, {"done": count})


def test_kill_9_resumes_from_the_last_checkpoint_stored(run_jobs, tmp_path):
    ledger = tmp_path / "ledger.txt"
    job = enqueue(resumable_jobs.walk_range, str(ledger), ITEMS, ITEM_SECONDS, EVERY)
    first = run_jobs()
    assert wait_for(lambda: len(lines(ledger)) >= 2000, 60), first.output()
    first.process.kill()
    first.process.wait()
    done_at_kill = len(lines(ledger))
    stored = Job.objects.get(pk=job.pk).resume
    assert stored is not None and done_at_kill - EVERY <= stored["done"] <= done_at_kill
    second = run_jobs()  # recovers the job once the killed worker's heartbeat is 1.5 s old
    finished = Job.objects.filter(pk=job.pk, status=JobStatus.SUCCESSFUL)
    assert wait_for(finished.exists, 120), second.output()
    second.signal()
    assert second.wait() == 0, second.output()
    job.refresh_from_db()
    assert (job.status, job.return_value, job.resume) == (JobStatus.SUCCESSFUL, "walked", {"done": ITEMS})
    assert job.attempts == 1, "nobody knew it had started: recovered uncharged"
    counts = collections.Counter(int(line) for line in lines(ledger))
    assert sorted(counts) == list(range(ITEMS)), "every item done"
    twice = sorted(item for item, seen in counts.items() if seen > 1)
    # Redone: exactly the items since the last checkpoint stored, one chunk at most.
    assert twice == list(range(stored["done"], done_at_kill)) and len(twice) <= EVERY
