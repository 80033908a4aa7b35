"""What the scheduler costs the database, and how punctual and exact it is.

    .venv/bin/python bench/scheduler.py --database postgres://root@127.0.0.1:5432/dbjobs_bench
    .venv/bin/python bench/scheduler.py --database sqlite:////tmp/bench.sqlite3 --seconds 10

S1 idle cost: one scheduler as the worker loop drives it (a call at least every poll
interval), with 0 and with 50 schedules that are not due: SQL statements per minute.
S2 per-second schedule: three `run_jobs` processes (each also schedules) and one
schedule due every second: jobs made per due time (must be exactly 1, none missing),
and lateness (job row written, database clock, minus its due time) p50/p95/max.
A scratch database is created and dropped, as bench/run.py does.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import scratch  # noqa: E402


def idle_cost(seconds: float, schedules: int) -> float:
    """SQL statements per minute of one scheduler with `schedules` schedules, none due."""
    from django.db import connection

    from django_dbjobs.models import Schedule
    from django_dbjobs.schedules.scheduler import Scheduler

    Schedule.objects.all().delete()
    for number in range(schedules):
        Schedule.objects.create(name=f"daily-{number}", cron=f"{number % 60} 3 * * *", job="bench.jobs.noop")
    statements = []
    scheduler = Scheduler("bench:idle")
    with connection.execute_wrapper(
        lambda execute, sql, *args: statements.append(sql) or execute(sql, *args)
    ):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            scheduler.fire_if_due()
            time.sleep(min(max(scheduler.due_in(), 0.01), 1.0, max(end - time.monotonic(), 0)))
    return len(statements) * 60 / seconds


def per_second(seconds: float) -> dict:
    from django.db.models import F

    from bench.run import Workers
    from django_dbjobs.models import Job, Schedule

    Schedule.objects.all().delete()
    Job.objects.all().delete()
    Schedule.objects.create(name="every-second", cron="* * * * * *", job="bench.jobs.noop")
    workers = Workers(3, ["--concurrency", "1"], {}, burst=False)
    time.sleep(seconds)
    workers.stop()
    workers.wait()
    rows = Job.objects.filter(scheduled_for__isnull=False).annotate(
        late=F("enqueued_at") - F("scheduled_for")
    )
    due = sorted(rows.values_list("scheduled_for", flat=True))
    late = sorted(lateness.total_seconds() * 1000 for lateness in rows.values_list("late", flat=True))
    span = int((due[-1] - due[0]).total_seconds()) + 1 if due else 0
    return {
        "due_times": span,
        "jobs": len(due),
        "duplicates": len(due) - len(set(due)),
        "missing": span - len(set(due)),
        "late_p50_ms": statistics.median(late) if late else None,
        "late_p95_ms": late[int(len(late) * 0.95)] if late else None,
        "late_max_ms": late[-1] if late else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database", required=True, help="Database URL (django-environ syntax).")
    parser.add_argument("--seconds", type=float, default=60.0, help="Length of each measurement.")
    options = parser.parse_args()
    scratch.setup(options.database)
    with scratch.scratch_database() as connection:
        idle_none = idle_cost(options.seconds, 0)
        idle_many = idle_cost(options.seconds, 50)
        exact = per_second(options.seconds)
    print(f"database: {connection.vendor}")
    print(f"S1 idle scheduler, no schedules:          {idle_none:.1f} statements/min")
    print(f"S1 idle scheduler, 50 schedules not due:  {idle_many:.1f} statements/min")
    print(
        f"S2 3 schedulers, 1 schedule per second:   {exact['jobs']} jobs for {exact['due_times']} due times, "
        f"{exact['duplicates']} duplicated, {exact['missing']} missing; lateness p50 "
        f"{exact['late_p50_ms']:.0f} ms, p95 {exact['late_p95_ms']:.0f} ms, max {exact['late_max_ms']:.0f} ms"
    )


if __name__ == "__main__":
    main()
