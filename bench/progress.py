"""What progress reports cost: queries per job-second of jobs reporting 1,000 times a second.

    .venv/bin/python bench/progress.py                                       # SQLite
    .venv/bin/python bench/progress.py --database postgres://root@127.0.0.1:5432/dbjobs_bench
    .venv/bin/python bench/progress.py --database mysql://root@127.0.0.1:3306/dbjobs_bench --jobs 8

On a scratch database, a worker (the run_jobs loop and threads, in this process, so
that every statement of every connection is counted) runs --jobs jobs at once, each
counting for --seconds, every millisecond: once reporting progress at each count
(``current_job().progress(done)``), once not. Printed: the statements of each run,
the difference per job-second, and the progress UPDATEs among them.
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.scratch import scratch_database, setup  # noqa: E402

#: The progress writer's UPDATE (models/progress_store.py), quoted as each database quotes.
PROGRESS_WRITE = re.compile(r'\s*UPDATE [`"]django_dbjobs_job[`"] SET [`"]progress_state[`"]')


class Statements:
    """Every statement of every connection, counted (installed as each connection opens)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.total = 0
        self.progress_writes = 0
        #: Its run is over: a connection object outlives it (closed, opened again), its wrappers too.
        self.active = True

    def __call__(self, execute, sql, params, many, context):
        if self.active:
            with self.lock:
                self.total += 1
                if PROGRESS_WRITE.match(sql):
                    self.progress_writes += 1
        return execute(sql, params, many, context)

    def install(self, sender, connection, **kwargs):
        if self not in connection.execute_wrappers:
            connection.execute_wrappers.append(self)


def run(jobs: int, seconds: float, report: bool) -> Statements:
    from django.db import connections
    from django.db.backends.signals import connection_created

    from bench.jobs import count_for
    from django_dbjobs import enqueue_many
    from django_dbjobs.models import Job
    from django_dbjobs.worker import Worker

    Job.objects.all().delete()
    enqueue_many(count_for, [(seconds, report)] * jobs)
    connections.close_all()  # every connection of the run opens counted
    statements = Statements()
    connection_created.connect(statements.install)
    try:
        Worker(concurrency=jobs, burst=True).run()
    finally:
        connection_created.disconnect(statements.install)
        statements.active = False
    assert Job.objects.filter(status="SUCCESSFUL").count() == jobs
    return statements


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default="sqlite:////tmp/dbjobs-bench.sqlite3")
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=2)
    options = parser.parse_args()
    setup(options.database)
    from django.db import connection

    with scratch_database():
        job_seconds = options.jobs * options.seconds
        print(
            f"{connection.vendor}: {options.jobs} jobs x {options.seconds:g} s ({job_seconds:g} job-seconds)"
        )
        run(options.jobs, 0.1, report=True)  # a warm-up: a first run's statements include the setup's
        for number in range(options.runs):
            silent = run(options.jobs, options.seconds, report=False)
            reporting = run(options.jobs, options.seconds, report=True)
            extra = reporting.total - silent.total
            print(
                f"  run {number + 1}: statements {silent.total} silent, {reporting.total} reporting "
                f"({options.jobs * options.seconds * 1000:,.0f} reports): {extra:+d}, "
                f"{extra / job_seconds:.2f} per job-second; progress UPDATEs {reporting.progress_writes} "
                f"({reporting.progress_writes / options.seconds:.2f} a second for all {options.jobs} jobs)"
            )


if __name__ == "__main__":
    main()
