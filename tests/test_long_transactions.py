"""Long transactions: dbjobs_status names the one holding back the cleanup of dead rows, the gauge shows it.

A real second connection holds a transaction open with a snapshot, as a forgotten
session of the application would.
"""

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, connections, transaction
from django.utils import timezone

from django_dbjobs.db.horizon import Holder, Horizon, TableRows, read_horizon
from django_dbjobs.models import Job
from django_dbjobs.operations.long_transactions import LongTransactions
from tests.test_gauges import TOKEN, of, scrape

pytestmark = pytest.mark.django_db(transaction=True)
APPLICATION = "dbjobs-test-holder"
ROOT = str(Path(__file__).resolve().parent.parent)
on_a_server = pytest.mark.skipif(
    connection.vendor == "sqlite", reason="SQLite keeps no old row versions: nothing holds them"
)


def status(*args):
    out = io.StringIO()
    call_command("dbjobs_status", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def holder():
    """A second connection in a transaction with a snapshot, left open; its pid or thread id."""
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            if other.vendor == "postgresql":
                cursor.execute("SET application_name = %s", [APPLICATION])
                cursor.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                cursor.execute("SELECT pg_backend_pid()")
                pid = cursor.fetchone()[0]
            else:
                cursor.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                cursor.execute("SELECT CONNECTION_ID()")
                pid = cursor.fetchone()[0]
            cursor.execute(f"SELECT COUNT(*) FROM {Job._meta.db_table}")  # noqa: S608 (our table's name)
        yield other, pid
    finally:
        with other.cursor() as cursor:
            cursor.execute("ROLLBACK")
        other.close()


@on_a_server
def test_a_transaction_left_open_is_named_failed_on_and_gauged_until_it_ends(holder, settings):
    settings.DBJOBS_METRICS_TOKEN = TOKEN
    other, pid = holder
    time.sleep(2.2)  # MariaDB counts whole seconds from trx_started
    report = json.loads(status("--json", "--long-transaction-after", "1"))["oldest_transaction"]
    assert report["applicable"] is True and report["unknown"] == []
    mine = [t for t in report["transactions"] if t["pid"] == pid]
    assert len(mine) == 1 and mine[0]["age_seconds"] >= 2, report
    assert report["culprit"]["pid"] == pid or report["culprit"]["age_seconds"] > mine[0]["age_seconds"]
    if connection.vendor == "postgresql":
        assert report["culprit"] == mine[0], "the only session of the test database"
        assert mine[0]["application"] == APPLICATION and mine[0]["state"] == "idle in transaction"
        assert mine[0]["query"].startswith("SELECT COUNT(*) FROM django_dbjobs_job")
        assert "django_dbjobs_job" in [t["table"] for t in report["tables"]]
    else:
        assert mine[0]["user"] == connection.settings_dict["USER"]
        assert mine[0]["state"] == f"db {connection.settings_dict['NAME']}, Sleep"
        assert isinstance(report["history_length"], int)
    text = status("--long-transaction-after", "1")
    if connection.vendor == "postgresql":
        assert f"Oldest transaction: pid {pid} (application '{APPLICATION}', user " in text
        assert "% dead rows (" in text
    else:
        assert f"Oldest transaction: thread {pid} (user {connection.settings_dict['USER']}, from " in text
        assert "InnoDB history list length: " in text
    assert f" {pid} (" not in status(), "not older than the default 60 s"

    with pytest.raises(
        CommandError, match=rf"(pid|thread) {pid} .* open for [0-9.]+s.*\(limit 1s\)"
    ) as raised:
        status("--fail-if-long-transaction", "1")
    assert raised.value.returncode == 1
    status("--fail-if-long-transaction", "3600")
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("dbjobs_status", "--json", "--fail-if-long-transaction", "1", stdout=out)
    judged = json.loads(out.getvalue())
    assert not judged["healthy"] and str(pid) in judged["problems"][0]
    assert judged["oldest_transaction"]["culprit"] is not None, "shown from the limit's age"

    _, samples = scrape(Authorization=f"Bearer {TOKEN}")
    assert of(samples, "dbjobs_database_oldest_transaction_seconds") >= 2
    if connection.vendor == "postgresql":
        assert of(samples, "dbjobs_table_dead_rows", table="django_dbjobs_job") >= 0
    else:
        assert of(samples, "dbjobs_database_history_length") >= 0

    with other.cursor() as cursor:
        cursor.execute("COMMIT")
    time.sleep(0.2)  # InnoDB refreshes what INNODB_TRX shows at most every 0.1 s
    after = json.loads(status("--json", "--long-transaction-after", "1"))["oldest_transaction"]
    assert pid not in [t["pid"] for t in after["transactions"]]
    if connection.vendor == "postgresql":  # MariaDB's are the whole server's: others may be open
        assert after["culprit"] is None and after["transactions"] == []
        status("--fail-if-long-transaction", "1")
        assert (
            of(scrape(Authorization=f"Bearer {TOKEN}")[1], "dbjobs_database_oldest_transaction_seconds") == 0
        )


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite only")
def test_sqlite_says_not_applicable_and_never_fails(settings):
    settings.DBJOBS_METRICS_TOKEN = TOKEN
    assert "Oldest transaction: not applicable (SQLite" in status("--fail-if-long-transaction", "0")
    report = json.loads(status("--json", "--fail-if-long-transaction", "0"))
    assert report["healthy"] and report["oldest_transaction"]["applicable"] is False
    _, samples = scrape(Authorization=f"Bearer {TOKEN}")
    assert of(samples, "dbjobs_database_oldest_transaction_seconds") == 0
    assert not [
        key for key in samples if key[0] in ("dbjobs_table_dead_rows", "dbjobs_database_history_length")
    ]


@pytest.fixture
def unprivileged_role():
    """A PostgreSQL role without pg_read_all_stats that may read the job tables, taken with SET ROLE."""
    role = f"dbjobs_probe_{connection.settings_dict['NAME']}"[:63]
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE ROLE "{role}" NOLOGIN')
        cursor.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
        cursor.execute(f'SET ROLE "{role}"')
    try:
        yield role
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET ROLE")
            cursor.execute("GRANT SELECT ON pg_catalog.pg_stat_activity TO PUBLIC")
            cursor.execute(f'DROP OWNED BY "{role}"')
            cursor.execute(f'DROP ROLE "{role}"')


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's statistics privileges")
def test_another_roles_transaction_shows_insufficient_privilege(holder, unprivileged_role):
    _, pid = holder
    horizon = read_horizon("default")
    assert horizon.unknown == [] and horizon.holders_read
    hidden = [h for h in horizon.transactions if h.pid == pid]
    assert hidden and hidden[0].query == "<insufficient privilege>" and hidden[0].age is None
    assert horizon.oldest is None, "no age known"
    lines = LongTransactions(horizon, 60.0, "django_dbjobs_job").lines()
    assert any(
        line.startswith("Transactions hidden from this role: 1 (<insufficient privilege>") for line in lines
    )
    status("--fail-if-long-transaction", "0")  # nothing it can judge: no failure


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's statistics privileges")
def test_an_unreadable_view_is_unknown_and_the_status_still_answers(unprivileged_role, settings):
    settings.DBJOBS_METRICS_TOKEN = TOKEN
    with connection.cursor() as cursor:  # the test database's own pg_stat_activity, back in the fixture
        cursor.execute("RESET ROLE")
        cursor.execute("REVOKE SELECT ON pg_catalog.pg_stat_activity FROM PUBLIC")
        cursor.execute(f'SET ROLE "{unprivileged_role}"')
    report = json.loads(status("--json", "--fail-if-long-transaction", "0"))
    unknown = report["oldest_transaction"]["unknown"]
    assert (
        report["healthy"]
        and len(unknown) == 1
        and unknown[0].startswith("pg_stat_activity: permission denied")
    )
    assert "Oldest transaction: unknown (pg_stat_activity: permission denied" in status()
    with transaction.atomic():  # a caller's transaction survives the refused read
        assert read_horizon("default").unknown[0].startswith("pg_stat_activity: permission denied")
        assert Job.objects.count() == 0
    _, samples = scrape(Authorization=f"Bearer {TOKEN}")
    assert not [key for key in samples if key[0] == "dbjobs_database_oldest_transaction_seconds"], "not 0"
    assert ("dbjobs_table_dead_rows", ("table", "django_dbjobs_job")) in samples


def held(kind="session", pid=None, age=None, name="", xid_age=None, **fields):
    values = {"application": "", "user": "", "client": "", "state": "", "query": ""} | fields
    return Holder(kind, pid, age=age, name=name, xid_age=xid_age, **values)


@pytest.mark.django_db(transaction=False)
def test_the_section_names_prepared_transactions_and_slots_and_the_job_tables_dead_rows():
    """What the servers here cannot make (max_prepared_transactions = 0, no standby): from values."""
    horizon = Horizon(
        holders=[
            held(pid=7, age=30.0, application="web", state="idle in transaction", query="SELECT 1"),
            held("prepared", age=7300.0, user="app", name="billing-42", xid_age=9000),
            held("replication slot", pid=88, state="active", name="standby_1", xid_age=120000),
            held(pid=9, age=None, query="<insufficient privilege>", xid_age=50),
        ],
        tables=[TableRows("django_dbjobs_job", 300, 700, None, 0)],
    )
    long = LongTransactions(horizon, 20.0, "django_dbjobs_job")
    assert long.lines() == [
        "Transactions hidden from this role: 1 (<insufficient privilege>: grant it pg_read_all_stats "
        "to see who holds them and since when)",
        "Oldest transaction: prepared transaction 'billing-42' (user app) open for 2.0h",
        "  also pid 7 (application 'web', idle in transaction) open for 30.0s: SELECT 1",
        "  replication slot 'standby_1' (active) holds rows 120000 transactions old",
        "  django_dbjobs_job: 70% dead rows (700 dead, 300 live), last autovacuum never (0 runs)",
    ]
    assert long.problem(7200.0).startswith(
        "prepared transaction 'billing-42' (user app) open for 2.0h (limit"
    )
    assert long.problem(7300.0) is None
    report = long.as_json()
    assert report["culprit"]["name"] == "billing-42" and report["tables"][0]["dead_share"] == 0.7
    assert [t["pid"] for t in report["transactions"]] == [None, 7, 9]
    assert report["replication_slots"][0]["xid_age"] == 120000
    assert LongTransactions(horizon, 8000.0, "django_dbjobs_job").lines()[1:] == [], "none long: one line"


@pytest.mark.skipif(connection.vendor != "mysql", reason="MariaDB/MySQL's PROCESS privilege")
def test_without_the_process_privilege_the_status_says_unknown_and_exits_0():
    """The real command, run as a user that may read the job tables and nothing of InnoDB's."""
    name = connection.settings_dict["NAME"]
    user = f"probe_{name}"[:32]
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE USER '{user}'@'%%' IDENTIFIED BY 'probe'")
        cursor.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON `{name}`.* TO '{user}'@'%%'")
    try:
        settings = connection.settings_dict
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DBJOBS_TEST_DATABASE_URL": f"mysql://{user}:probe@{settings['HOST']}:{settings['PORT']}/{name}",
            "PYTHONPATH": ROOT,
        }
        command = [sys.executable, "-m", "django", "dbjobs_status", "--fail-if-long-transaction", "0"]
        ran = subprocess.run(
            [*command, "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
        assert ran.returncode == 0, ran.stderr
        unknown = json.loads(ran.stdout)["oldest_transaction"]["unknown"]
        assert [reason.split(":")[0] for reason in unknown] == [
            "information_schema.INNODB_TRX",
            "information_schema.INNODB_METRICS",
        ]
        assert "PROCESS" in unknown[0], unknown
        ran = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert (
            ran.returncode == 0
            and "Oldest transaction: unknown (information_schema.INNODB_TRX: " in ran.stdout
        )
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP USER '{user}'@'%%'")


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's autovacuum")
@pytest.mark.django_db(transaction=True)
def test_a_job_table_autovacuum_may_not_visit_is_reported_with_its_dead_rows():
    finished = {"status": "SUCCESSFUL", "finished_at": timezone.now()}  # nothing due: no problem to report
    Job.objects.bulk_create([Job(name="tests.jobs.add", queue="default", **finished) for _ in range(1200)])
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE django_dbjobs_job SET (autovacuum_enabled = false)")
    try:
        Job.objects.update(priority=1)  # every row leaves a dead version, which nothing cleans up
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_force_next_flush()")
        deadline = time.monotonic() + 10
        while True:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_stat_clear_snapshot()")
            text = status()
            if "Autovacuum is off" in text or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert "Autovacuum is off for django_dbjobs_job" in text
        assert "1200 dead rows (50%)" in text
        (job_table,) = [
            t
            for t in json.loads(status("--json"))["oldest_transaction"]["tables"]
            if t["table"] == "django_dbjobs_job"
        ]
        assert job_table["autovacuum"] is False and job_table["dead_rows"] == 1200
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE django_dbjobs_job RESET (autovacuum_enabled)")
    assert "Autovacuum is off" not in status() or connection_autovacuum_off()


def connection_autovacuum_off() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        return cursor.fetchone()[0] == "off"
