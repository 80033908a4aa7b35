"""Where a single enqueue()'s time goes, next to the raw INSERT loop of bench/raw.py.

    .venv/bin/python bench/enqueue_profile.py --database postgres://root@127.0.0.1:5432/dbjobs_bench
    .venv/bin/python bench/enqueue_profile.py --database sqlite:////tmp/bench.sqlite3 --jobs 5000

Each job of the loop is split in three by the thread's CPU clock: the Python before the
statement (validation, the enqueuer's context, the id, the Job, the parameters), the
statement itself (db/direct.run(): the driver, the round trip, the commit), and the Python
after it (the returned times, the wake-up and the job_enqueued check). The raw loop is
timed the same way as a whole. Wall time is per job too. On a host where the process
sleeps during each round trip, what runs after it runs on cold caches: the same Python
costs two to four times what it costs in a tight loop (the last line, with the statement
replaced by its last answer).

Uses a scratch database (``test_<name>``), as bench/run.py does.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import scratch  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database", required=True, help="Database URL (django-environ syntax).")
    parser.add_argument("--jobs", type=int, default=3000, help="Jobs per loop.")
    parser.add_argument("--runs", type=int, default=3, help="Loops of each kind (medians shown).")
    options = parser.parse_args()
    scratch.setup(options.database)
    with scratch.scratch_database() as connection:
        rows = profile(options.jobs, options.runs)
    print(f"enqueue() profile on {connection.vendor}, µs per job, medians of {options.runs} loops")
    for label, value in rows:
        print(f"  {label:<58} {value:8.1f}")


def profile(count: int, runs: int) -> list[tuple[str, float]]:
    from bench import jobs, raw
    from django_dbjobs import enqueue
    from django_dbjobs.enqueuing import insert_one

    real = insert_one.direct.run
    clock = time.thread_time
    spent = {"before": 0.0, "statement": 0.0, "after": 0.0, "waited": 0.0}
    marks = {"start": 0.0, "end": 0.0, "answer": None}

    def timed(*args, **kwargs):
        started, wall = clock(), time.perf_counter()
        spent["before"] += started - marks["start"]
        answer = marks["answer"] = real(*args, **kwargs)
        spent["waited"] += time.perf_counter() - wall
        marks["end"] = clock()
        spent["statement"] += marks["end"] - started
        return answer

    def replayed(*args, **kwargs):
        return marks["answer"]

    def per_job(seconds: float) -> float:
        return seconds / count * 1e6

    samples: dict[str, list[float]] = {}

    def add(label: str, value: float) -> None:
        samples.setdefault(label, []).append(value)

    for _ in range(200):  # warm up: statements made, connection open
        enqueue(jobs.noop)
    insert_one.direct.run = timed
    try:
        for _ in range(runs):
            spent.update(before=0.0, statement=0.0, after=0.0, waited=0.0)
            wall, cpu = time.perf_counter(), clock()
            for _ in range(count):
                marks["start"] = clock()
                enqueue(jobs.noop)
                spent["after"] += clock() - marks["end"]
            add("enqueue(): wall", per_job(time.perf_counter() - wall))
            add("enqueue(): CPU", per_job(clock() - cpu))
            add("  Python before the statement (CPU)", per_job(spent["before"]))
            add("  the statement, db/direct.run() (CPU)", per_job(spent["statement"]))
            add("  Python after the statement (CPU)", per_job(spent["after"]))
            add("  the statement, db/direct.run() (wall)", per_job(spent["waited"]))
            wall, cpu = time.perf_counter(), clock()
            raw.insert_loop(count)
            add("raw INSERT loop: wall", per_job(time.perf_counter() - wall))
            add("raw INSERT loop: CPU", per_job(clock() - cpu))
        insert_one.direct.run = replayed
        cpu = clock()
        for _ in range(count):
            enqueue(jobs.noop)
        add("enqueue()'s Python alone, warm (statement replayed; CPU)", per_job(clock() - cpu))
    finally:
        insert_one.direct.run = real
    return [(label, statistics.median(values)) for label, values in samples.items()]


if __name__ == "__main__":
    main()
