"""Web code and workers through a real PgBouncer, in transaction and in session pooling mode.

Runs only with DBJOBS_TEST_PGBOUNCER=1 (.ci/run sets it), on PostgreSQL: it starts a
pgbouncer process of its own (tests/pgbouncer_server.py) whose database entries lead to the
test database in each mode; run_jobs subprocesses reach their 'default' through it, with
``DBJOBS_POLL_INTERVAL`` 5 s, so a wake-up that only the poll would bring fails the test.
"""

import io
import json
import os
import signal
import time

import pytest
from django.core.management import call_command
from django.db import connection, connections, transaction
from django.db.utils import load_backend

from django_dbjobs import enqueue, enqueue_many
from django_dbjobs.models import Job, WorkerProcess
from tests import jobs
from tests.conftest import wait_for
from tests.pgbouncer_server import OPT_IN, PgBouncer

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="PgBouncer pools PostgreSQL connections only"
    ),
    pytest.mark.skipif(
        os.environ.get(OPT_IN) != "1",
        reason=f"starts a PgBouncer (Debian's pgbouncer); set {OPT_IN}=1 to run it (CI does)",
    ),
]

POLL_INTERVAL = 5.0
#: A new job reaches an idle worker well within this (seconds): 10-50 ms probes or a NOTIFY,
#: where the poll alone would take up to POLL_INTERVAL.
WOKEN_WITHIN = 1.0
SCHEDULES = {"ping": {"job": "tests.jobs.tick", "cron": "* * * * * *", "queue": "pings"}}
POOLER_LINE = "goes through a connection pooler (PgBouncer?), where LISTEN does not hear"
UNHEARD_LINE = "heard nothing of database 'default': a transaction pooler, or another database"
SESSION_LINE = "LISTEN through a pooler on database 'default' hears this one (session pooling)"


@pytest.fixture
def pooler(tmp_path):
    server = PgBouncer(connection.settings_dict, tmp_path)
    yield server
    server.stop()


@pytest.fixture
def pooled(pooler):
    """Add a database alias of this thread that goes through `pooler` in a mode; return it.

    Not in DATABASES (the test's database checks would refuse it): made here, as Django makes
    a connection of its own settings."""
    aliases = []

    def add(mode: str) -> str:
        alias = f"pooled_{mode.replace('-', '_')}"
        settings_dict = {**connection.settings_dict, **pooler.database(mode)}
        connections[alias] = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(settings_dict, alias)
        aliases.append(alias)
        return alias

    yield add
    for alias in aliases:
        connections[alias].close()
        del connections[alias]


def start_worker(
    run_jobs, pooler, mode: str, listen_database: str | None = None, schedules: dict | None = None
):
    env = {
        "DBJOBS_TEST_POOLED": json.dumps(pooler.database(mode)),
        "DBJOBS_TEST_POLL_INTERVAL": str(POLL_INTERVAL),
        # A schedule's jobs would wake the worker every second: not where wake-ups are timed.
        "DBJOBS_TEST_SCHEDULES": json.dumps(schedules or {}),
    }
    if listen_database:
        env["DBJOBS_TEST_LISTEN_DATABASE"] = listen_database
    worker = run_jobs("--concurrency", "2", env=env)
    assert wait_for(lambda: "Worker started" in worker.output(), 30), worker.output()
    return worker


def started_line(worker) -> str:
    return next(line for line in worker.output().splitlines() if "Worker started" in line)


def succeeded(ids: list[str]) -> bool:
    return Job.objects.filter(pk__in=ids, status="SUCCESSFUL").count() == len(ids)


@pytest.mark.parametrize(
    "mode, listen_database, way",
    [
        ("transaction", None, "probe"),  # LISTEN would go through the pooler: it probes instead
        ("transaction", "direct", "listen:direct"),  # a direct connection beside the pooled one
        ("transaction-prepared", None, "probe"),  # prepared statements the pooler loses: sent again
        ("session", None, "probe"),  # a pooler all the same: only the user can say LISTEN works
        ("session", "default", "listen"),  # ...and says so by naming the alias
    ],
)
def test_web_code_and_workers_work_through_pgbouncer(run_jobs, pooler, pooled, mode, listen_database, way):
    alias = pooled(mode)
    worker = start_worker(run_jobs, pooler, mode, listen_database)
    assert started_line(worker).endswith(f"wakeups={way}"), worker.output()
    assert (POOLER_LINE in worker.output()) == (way == "probe"), worker.output()
    assert (SESSION_LINE in worker.output()) == (mode == "session" and way == "listen"), worker.output()

    with transaction.atomic(using=alias):  # web code: the job commits with the request's data
        kept = enqueue(jobs.add, 1, 2, using=alias)
    with transaction.atomic(using=alias):
        dropped = enqueue(jobs.add, 3, 4, using=alias)
        transaction.set_rollback(True, using=alias)
    with transaction.atomic(using=alias):
        many = enqueue_many(jobs.add, [(n, n) for n in range(100)], using=alias)  # COPY: 64 rows or more
    few = enqueue_many(jobs.add, [(n, 1) for n in range(3)], using=alias)  # an INSERT, in autocommit
    retried = enqueue(jobs.fails_until_attempt, 2, using=alias)  # a prepared INSERT where allowed
    ids = [kept.pk, retried.pk, *(job.pk for job in [*many, *few])]
    assert wait_for(lambda: succeeded(ids), 30), worker.output()
    assert not Job.objects.filter(pk=dropped.pk).exists()
    assert Job.objects.get(pk=kept.pk).return_value == 3
    assert Job.objects.get(pk=retried.pk).attempts == 2

    time.sleep(1)  # idle: probing at its longest step, or waiting on LISTEN
    enqueued = time.monotonic()
    late = enqueue(jobs.add, 5, 6, using=alias)
    assert wait_for(lambda: succeeded([late.pk]), POLL_INTERVAL * 2, interval=0.005), worker.output()
    woken = time.monotonic() - enqueued
    assert woken < WOKEN_WITHIN, f"an idle worker took {woken:.3f}s to run a new job ({way})"

    row = WorkerProcess.objects.get(pid=worker.process.pid)  # its heartbeat, through the pooler
    assert wait_for(lambda: WorkerProcess.objects.get(pk=row.pk).heartbeat_at > row.heartbeat_at, 10)
    status = io.StringIO()
    call_command("dbjobs_status", database=alias, stdout=status)
    assert "Live workers: 1" in status.getvalue(), status.getvalue()
    call_command("prune_jobs", "--older-than", "0", database=alias, stdout=io.StringIO())
    assert not Job.objects.filter(pk__in=ids).exists()

    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
    assert " ERROR " not in worker.output(), worker.output()


def test_a_listen_alias_named_through_a_transaction_pooler_fails_the_handshake(run_jobs, pooler):
    """DBJOBS_LISTEN_DATABASE naming an alias through a transaction pooler: its LISTEN would
    stay on a server connection the pooler hands to other clients (they would get our
    notifications) and hear nothing; the handshake finds it deaf, and the worker probes."""
    worker = start_worker(run_jobs, pooler, "transaction", listen_database="default")
    assert started_line(worker).endswith("wakeups=probe"), worker.output()
    warnings = [line for line in worker.output().splitlines() if " WARNING " in line]
    assert len(warnings) == 1 and UNHEARD_LINE in warnings[0], worker.output()

    time.sleep(1)  # idle: probing at its longest step
    enqueued = time.monotonic()
    job = enqueue(jobs.add, 5, 6)
    assert wait_for(lambda: succeeded([job.pk]), POLL_INTERVAL * 2, interval=0.005), worker.output()
    woken = time.monotonic() - enqueued
    assert woken < WOKEN_WITHIN, f"an idle worker took {woken:.3f}s to run a new job"
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()


def test_a_killed_workers_job_is_swept_and_schedules_fire_through_a_transaction_pooler(run_jobs, pooler):
    first = start_worker(run_jobs, pooler, "transaction")
    job = enqueue(jobs.slow, 3)
    assert wait_for(lambda: Job.objects.get(pk=job.pk).status == "RUNNING", 10), first.output()
    first.kill()  # SIGKILL: its job stays RUNNING under a dead worker until a sweep
    second = start_worker(run_jobs, pooler, "transaction", schedules=SCHEDULES)

    def taken_again() -> bool:
        again = Job.objects.get(pk=job.pk)
        return again.status == "RUNNING" and again.worker.split(":")[1] == str(second.process.pid)

    assert wait_for(taken_again, 20), second.output()
    assert wait_for(lambda: succeeded([job.pk]), 10), second.output()
    assert wait_for(lambda: Job.objects.filter(queue="pings", status="SUCCESSFUL").count() >= 2, 10)
    second.signal(signal.SIGTERM)
    assert second.wait() == 0, second.output()


def test_a_worker_parked_by_pgbouncer_stops_and_resumes_within_query_wait_timeout(run_jobs, pooler):
    """PgBouncer parks statements while PostgreSQL is away (PAUSE here: the same wait, without
    stopping the shared server) up to query_wait_timeout, then disconnects the client: the
    worker waits the outage out, runs jobs again once the pooler resumes, and a SIGTERM while
    parked ends it within query_wait_timeout, not the 120 s default (docs: poolers)."""
    query_wait_timeout = 3
    pooler.admin(f"SET query_wait_timeout = {query_wait_timeout}")
    worker = start_worker(run_jobs, pooler, "transaction")
    pooler.admin("PAUSE dbjobs_transaction")
    try:
        job = enqueue(jobs.add, 1, 2)  # straight to PostgreSQL: only the worker is parked
        time.sleep(query_wait_timeout * 2)
        assert Job.objects.get(pk=job.pk).status == "READY"
    finally:
        pooler.admin("RESUME dbjobs_transaction")
    assert wait_for(lambda: succeeded([job.pk]), 30), worker.output()

    pooler.admin("PAUSE dbjobs_transaction")
    try:
        time.sleep(1)  # its next statement is parked
        stopping = time.monotonic()
        worker.signal(signal.SIGTERM)
        assert worker.wait(60) == 0, worker.output()
        stopped = time.monotonic() - stopping
    finally:
        pooler.admin("RESUME dbjobs_transaction")
    assert stopped < query_wait_timeout + 5, f"stopped {stopped:.1f}s after SIGTERM\n{worker.output()}"
