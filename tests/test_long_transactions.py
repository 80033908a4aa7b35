"""Long transactions: dbjobs_status names the one holding back the cleanup of dead rows, the gauge shows it.

Real second connections hold transactions open, as a forgotten session of the application
would; real dead rows in the job table. What a role may not read, and what the servers
here cannot make, are in test_long_transactions_views.py.
"""

import json
import time

import pytest
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from django_dbjobs.db.horizon import first_line
from django_dbjobs.models import Job
from tests.gauges_helpers import TOKEN, of, scrape
from tests.horizon_helpers import APPLICATION, other_connection, running, snapshot_held, status

pytestmark = pytest.mark.django_db(transaction=True)
on_a_server = pytest.mark.skipif(
    connection.vendor == "sqlite", reason="SQLite keeps no old row versions: nothing holds them"
)


@pytest.fixture
def holder():
    with snapshot_held() as held:
        yield held


def report(*args):
    return json.loads(status("--json", *args))["oldest_transaction"]


@on_a_server
def test_a_transaction_left_open_is_named_failed_on_and_gauged_until_it_ends(holder, settings):
    settings.DBJOBS_METRICS_TOKEN = TOKEN
    other, pid = holder
    time.sleep(2.2)  # MariaDB counts whole seconds from trx_started
    shown = report("--long-transaction-after", "1")
    assert shown["applicable"] is True and shown["unknown"] == []
    mine = [t for t in shown["transactions"] if t["pid"] == pid]
    assert len(mine) == 1 and mine[0]["age_seconds"] >= 2, shown
    assert shown["culprit"]["pid"] == pid or shown["culprit"]["age_seconds"] > mine[0]["age_seconds"]
    if connection.vendor == "postgresql":
        assert shown["culprit"] == mine[0], "the only session of the test database"
        assert mine[0]["application"] == APPLICATION and mine[0]["state"] == "idle in transaction"
        assert mine[0]["query"].startswith("SELECT COUNT(*) FROM django_dbjobs_job"), (
            "the first line not blank"
        )
        assert mine[0]["xid_age"] >= 0 and shown["oldest_xmin_age"] >= mine[0]["xid_age"]
        assert "django_dbjobs_job" in [t["table"] for t in shown["tables"]]
    else:
        assert mine[0]["user"] == connection.settings_dict["USER"]
        assert mine[0]["state"] == f"db {connection.settings_dict['NAME']}, Sleep, REPEATABLE READ"
        assert mine[0]["query"] == "", "idle: MariaDB keeps no last statement"
        assert isinstance(shown["history_length"], int)
    text = status("--long-transaction-after", "1")
    if connection.vendor == "postgresql":
        assert f"Oldest transaction: pid {pid} (application '{APPLICATION}', user " in text
        assert " transactions old: SELECT COUNT(*) FROM django_dbjobs_job" in text
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
    with pytest.raises(CommandError):
        status("--json", "--fail-if-long-transaction", "1")

    _, samples = scrape(Authorization=f"Bearer {TOKEN}")
    assert of(samples, "dbjobs_database_oldest_transaction_seconds") >= 2
    if connection.vendor == "postgresql":
        assert of(samples, "dbjobs_table_dead_rows", table="django_dbjobs_job") >= 0
        assert of(samples, "dbjobs_database_oldest_xmin_age") >= mine[0]["xid_age"]
    else:
        assert of(samples, "dbjobs_database_history_length") >= 0
        assert not [key for key in samples if key[0] == "dbjobs_database_oldest_xmin_age"]

    with other.cursor() as cursor:
        cursor.execute("COMMIT")
    time.sleep(0.2)  # InnoDB refreshes what INNODB_TRX shows at most every 0.1 s
    after = report("--long-transaction-after", "1")
    assert pid not in [t["pid"] for t in after["transactions"]]
    if connection.vendor == "postgresql":  # MariaDB's are the whole server's: others may be open
        assert after["culprit"] is None and after["transactions"] == []
        status("--fail-if-long-transaction", "1")
        samples = scrape(Authorization=f"Bearer {TOKEN}")[1]
        assert of(samples, "dbjobs_database_oldest_transaction_seconds") == 0


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's snapshots and xids")
def test_the_culprit_is_the_oldest_snapshot_not_the_oldest_transaction(holder):
    """A READ COMMITTED transaction begun earlier holds only its running statement's snapshot."""
    other, pid = holder
    with other_connection() as (early, early_pid):
        with early.cursor() as cursor:
            cursor.execute("BEGIN")  # READ COMMITTED: a snapshot per statement
            cursor.execute("SELECT 1")
        time.sleep(1.5)
        for _ in range(4):  # until no other database's transaction is both horizons (a shared server)
            # The holder's snapshot, then a transaction id used (the horizon moves on), then
            # the early transaction's statement, with a snapshot newer than the holder's.
            with other.cursor() as cursor:
                cursor.execute("COMMIT")
                cursor.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
                cursor.execute("SELECT 1")
            with connection.cursor() as cursor:
                cursor.execute("SELECT txid_current()")
            time.sleep(0.3)
            statement = running(early, "SELECT pg_sleep(4)")
            time.sleep(0.5)
            shown = report("--long-transaction-after", "0.2")
            (mine,) = [t for t in shown["transactions"] if t["pid"] == pid]
            (its,) = [t for t in shown["transactions"] if t["pid"] == early_pid]
            if its["xid_age"] < mine["xid_age"]:
                break
            statement.join()
        assert its["age_seconds"] > mine["age_seconds"] + 1 and its["xid_age"] < mine["xid_age"], shown
        assert shown["culprit"]["pid"] == pid, "the snapshot that pins rows, not the older transaction"
        assert [t["pid"] for t in shown["transactions"]][:2] == [pid, early_pid]
        status("--fail-if-long-transaction", "1.2")  # the holder is younger: no failure
        with pytest.raises(CommandError, match=rf"pid {pid} "):
            status("--fail-if-long-transaction", "0.1")
        statement.join()


@pytest.mark.skipif(connection.vendor != "mysql", reason="InnoDB's read views")
def test_a_read_committed_transaction_counts_only_while_a_statement_runs():
    """It holds no read view between statements (Django's level); while one runs, for as long as it has."""
    with other_connection() as (other, thread):
        with other.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
            cursor.execute("START TRANSACTION")
            cursor.execute("SELECT COUNT(*) FROM django_dbjobs_job")
        time.sleep(2.2)
        assert thread not in [t["pid"] for t in report()["transactions"]], "idle: holds nothing"
        statement = running(other, "\n\n  SELECT SLEEP(3)")
        time.sleep(1.3)
        (its,) = [t for t in report()["transactions"] if t["pid"] == thread]
        assert 1 <= its["age_seconds"] < 2.5, "the statement's time, not the transaction's"
        assert its["query"] == "SELECT SLEEP(3)" and its["state"].endswith(", READ COMMITTED")
        statement.join()


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite only")
def test_sqlite_says_not_applicable_and_never_fails(settings):
    settings.DBJOBS_METRICS_TOKEN = TOKEN
    assert "Oldest transaction: not applicable (SQLite" in status("--fail-if-long-transaction", "0")
    shown = json.loads(status("--json", "--fail-if-long-transaction", "0"))
    assert shown["healthy"] and shown["oldest_transaction"]["applicable"] is False
    _, samples = scrape(Authorization=f"Bearer {TOKEN}")
    assert of(samples, "dbjobs_database_oldest_transaction_seconds") == 0
    assert not [
        key
        for key in samples
        if key[0]
        in ("dbjobs_table_dead_rows", "dbjobs_database_history_length", "dbjobs_database_oldest_xmin_age")
    ]


@pytest.mark.django_db(transaction=False)
@pytest.mark.parametrize(
    "query, line",
    [
        ("SELECT 1", "SELECT 1"),
        ("\n\n   SELECT *\n  FROM t", "SELECT *"),
        ("\r\n\tUPDATE t SET a = 1", "UPDATE t SET a = 1"),
        ("  \n \n", ""),
        ("x" * 300, "x" * 200),
    ],
)
def test_the_first_line_shown_is_the_first_not_blank(query, line):
    assert first_line(query) == line


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's autovacuum")
def test_a_job_table_autovacuum_may_not_visit_is_reported_with_its_dead_rows():
    finished = {"status": "SUCCESSFUL", "finished_at": timezone.now()}  # nothing due: no problem to report
    Job.objects.bulk_create([Job(name="tests.jobs.add", queue="default", **finished) for _ in range(1200)])
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE django_dbjobs_job SET (autovacuum_enabled = false)")
    try:
        Job.objects.update(priority=1)  # every row leaves a dead version, which nothing cleans up
        if connection.pg_version >= 150000:  # before 15 the counts reach the view within 0.5 s
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_stat_force_next_flush()")
        deadline = time.monotonic() + 20
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
    text = status()
    assert "Autovacuum is off" not in text or server_autovacuum_off()
    assert "django_dbjobs_job: 50% dead rows (1200 dead, 1200 live)" in text or server_autovacuum_off(), (
        "shown while many are dead, with no long transaction"
    )


def server_autovacuum_off() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        return cursor.fetchone()[0] == "off"
