"""Long transactions: what a database user may not read, and the report's lines.

Hidden sessions and unreadable views on the real servers; prepared transactions,
walsenders and replication slots (which the servers here cannot make) from values.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management.base import CommandError
from django.db import connection, transaction

from django_dbjobs.db.horizon import Holder, Horizon, TableRows, read_horizon
from django_dbjobs.models import Job
from django_dbjobs.observability.gauges import horizon_gauges
from django_dbjobs.operations.long_transactions import LongTransactions
from tests.conftest import RESTARTS_OPT_IN
from tests.gauges_helpers import TOKEN, of, scrape
from tests.horizon_helpers import snapshot_held, status

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = str(Path(__file__).resolve().parent.parent)
on_postgresql = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's privileges")


@pytest.fixture
def unprivileged_role():
    """A PostgreSQL role without pg_read_all_stats that may read the job tables, taken with SET ROLE.

    Roles are the cluster's, not the test database's: one a crashed run left is dropped first.
    """
    role = f"dbjobs_probe_{connection.settings_dict['NAME']}"[:63]
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role])
        if cursor.fetchone():
            cursor.execute(f'DROP OWNED BY "{role}"')
        cursor.execute(f'DROP ROLE IF EXISTS "{role}"')
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


@on_postgresql
def test_another_roles_snapshot_is_hidden_and_leaves_the_seconds_gauge_out(unprivileged_role, settings):
    settings.DBJOBS_METRICS_TOKEN = TOKEN
    with snapshot_held() as (_, pid):
        horizon = read_horizon("default")
        assert horizon.unknown == [] and horizon.holders_read
        hidden = [h for h in horizon.transactions if h.pid == pid]
        assert hidden and hidden[0].query == "<insufficient privilege>" and hidden[0].age is None
        assert horizon.oldest is None and horizon.oldest_hidden, "no age known"
        assert hidden[0].xid_age is not None and horizon.oldest_xmin_age >= hidden[0].xid_age
        lines = LongTransactions(horizon, 60.0, "django_dbjobs_job").lines()
        assert any(
            line.startswith("Transactions hidden from this role: 1 (the oldest horizon") for line in lines
        )
        status("--fail-if-long-transaction", "0")  # hidden, not unreadable: nothing it can judge
        _, samples = scrape(Authorization=f"Bearer {TOKEN}")
        assert not [key for key in samples if key[0] == "dbjobs_database_oldest_transaction_seconds"], "not 0"
        assert of(samples, "dbjobs_database_oldest_xmin_age") >= hidden[0].xid_age


@on_postgresql
def test_an_unreadable_view_is_unknown_and_fails_the_probe_that_asked(unprivileged_role, settings):
    settings.DBJOBS_METRICS_TOKEN = TOKEN
    with connection.cursor() as cursor:  # the test database's own pg_stat_activity, back in the fixture
        cursor.execute("RESET ROLE")
        cursor.execute("REVOKE SELECT ON pg_catalog.pg_stat_activity FROM PUBLIC")
        cursor.execute(f'SET ROLE "{unprivileged_role}"')
    report = json.loads(status("--json"))
    unknown = report["oldest_transaction"]["unknown"]
    assert report["healthy"] and len(unknown) == 1 and unknown[0].startswith("pg_stat_activity: permission")
    assert "Oldest transaction: unknown (pg_stat_activity: permission denied" in status()
    with pytest.raises(
        CommandError, match="^cannot tell whether a transaction holds back .*: pg_stat_activity"
    ):
        status("--fail-if-long-transaction", "3600")
    with transaction.atomic():  # a caller's transaction survives the refused read
        assert read_horizon("default").unknown[0].startswith("pg_stat_activity: permission denied")
        assert Job.objects.count() == 0
    _, samples = scrape(Authorization=f"Bearer {TOKEN}")
    assert not [
        key
        for key in samples
        if key[0] in ("dbjobs_database_oldest_transaction_seconds", "dbjobs_database_oldest_xmin_age")
    ], "not 0"
    assert ("dbjobs_table_dead_rows", ("table", "django_dbjobs_job")) in samples


@pytest.mark.skipif(connection.vendor != "mysql", reason="MariaDB/MySQL's PROCESS privilege")
def test_without_the_process_privilege_the_status_says_unknown_and_the_probe_fails():
    """The real command, run as a user that may read the job tables and nothing of InnoDB's."""
    name = connection.settings_dict["NAME"]
    user = f"probe_{name}"[:32]
    with connection.cursor() as cursor:  # users are the server's: one a crashed run left goes first
        cursor.execute(f"DROP USER IF EXISTS '{user}'@'%%'")
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
        command = [sys.executable, "-m", "django", "dbjobs_status"]
        ran = subprocess.run(
            [*command, "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
        assert ran.returncode == 0, ran.stderr
        report = json.loads(ran.stdout)["oldest_transaction"]
        assert [reason.split(":")[0] for reason in report["unknown"]] == ["information_schema.INNODB_TRX"]
        assert "PROCESS" in report["unknown"][0], report
        if connection.mysql_is_mariadb:  # a status variable: no privilege needed
            assert isinstance(report["history_length"], int)
        ran = subprocess.run(
            [*command, "--fail-if-long-transaction", "3600"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (
            ran.returncode == 1
            and "Oldest transaction: unknown (information_schema.INNODB_TRX: " in ran.stdout
        )
        assert "cannot tell whether a transaction holds back the cleanup of dead rows" in ran.stderr
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP USER IF EXISTS '{user}'@'%%'")


@pytest.mark.skipif(connection.vendor != "mysql", reason="InnoDB's history list")
@pytest.mark.skipif(
    os.environ.get(RESTARTS_OPT_IN) != "1",
    reason=f"turns off and resets a server-wide InnoDB metric; set {RESTARTS_OPT_IN}=1 to run it (CI does)",
)
def test_the_history_list_length_is_read_with_the_metric_disabled():
    """The server's trx_rseg_history_len metric off and reset (a server setting, restored after)."""
    if not connection.mysql_is_mariadb:
        pytest.skip("MySQL reads the metric, and says unknown when it is off")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT ENABLED FROM information_schema.INNODB_METRICS WHERE NAME = 'trx_rseg_history_len'"
        )
        (was_enabled,) = cursor.fetchone()
        cursor.execute("SET GLOBAL innodb_monitor_disable = 'trx_rseg_history_len'")
        cursor.execute("SET GLOBAL innodb_monitor_reset_all = 'trx_rseg_history_len'")
    try:
        with snapshot_held():  # what purge may not remove while it is open: one update's undo
            Job.objects.create(name="tests.jobs.add", queue="default")
            Job.objects.update(priority=1)
            assert read_horizon("default").history_length >= 1
    finally:
        if was_enabled:  # as it was found
            with connection.cursor() as cursor:
                cursor.execute("SET GLOBAL innodb_monitor_enable = 'trx_rseg_history_len'")


def held(kind="session", pid=None, age=None, name="", xid_age=None, **fields):
    values = {"application": "", "user": "", "client": "", "state": "", "query": ""} | fields
    return Holder(kind, pid, age=age, name=name, xid_age=xid_age, **values)


@pytest.mark.django_db(transaction=False)
def test_the_section_names_the_oldest_horizon_walsenders_slots_and_the_job_tables_dead_rows():
    """What the servers here cannot make (max_prepared_transactions = 0, no standby): from values."""
    horizon = Horizon(
        counts_xids=True,
        holders=[
            held(pid=7, age=9000.0, application="web", state="active", query="SELECT 1", xid_age=3),
            held("prepared", age=7300.0, user="app", name="billing-42", xid_age=9000),
            held("replication slot", pid=88, state="active", name="standby_1", xid_age=120000),
            held("catalog slot", state="inactive", name="cdc", xid_age=500000),
            held("walsender", pid=91, application="standby_2", client="10.0.0.2", xid_age=40),
            held(pid=9, age=None, query="<insufficient privilege>", xid_age=50),
        ],
        tables=[TableRows("django_dbjobs_job", 3000, 7000, None, 0)],
    )
    long = LongTransactions(horizon, 20.0, "django_dbjobs_job")
    assert long.lines() == [
        "Transactions hidden from this role: 1 (<insufficient privilege>: grant it pg_read_all_stats "
        "to see who holds them and since when)",
        "Oldest transaction: prepared transaction 'billing-42' (user app) open for 2.0h, "
        "holds rows 9000 transactions old",
        "  also pid 7 (application 'web', active) open for 2.5h, holds rows 3 transactions old: SELECT 1",
        "Replication slot 'standby_1' (active) holds rows 120000 transactions old",
        "Logical replication slot 'cdc' (inactive) holds system catalog rows 500000 transactions old "
        "(catalog_xmin: not the job tables')",
        "Walsender pid 91 (application 'standby_2', 10.0.0.2) holds rows 40 transactions old "
        "(hot_standby_feedback, no slot)",
        "django_dbjobs_job: 70% dead rows (7000 dead, 3000 live), last autovacuum never (0 runs)",
    ]
    assert long.problem(7200.0).startswith("prepared transaction 'billing-42' (user app) open for 2.0h")
    assert long.problem(7300.0) is None, "judged on the oldest horizon, not on the oldest transaction"
    report = long.as_json()
    assert report["culprit"]["name"] == "billing-42" and report["tables"][0]["dead_share"] == 0.7
    assert [t["pid"] for t in report["transactions"]] == [None, 9, 7]
    assert [s["kind"] for s in report["replication_slots"]] == [
        "replication slot",
        "catalog slot",
        "walsender",
    ]
    assert report["oldest_xmin_age"] == 120000, "a catalog_xmin holds only the catalogs"
    assert [(g.name, g.samples) for g in horizon_gauges(horizon)][:2] == [
        ("dbjobs_database_oldest_transaction_seconds", [((), 7300.0)]),
        ("dbjobs_database_oldest_xmin_age", [((), 120000.0)]),
    ]
    quiet = LongTransactions(horizon, 8000.0, "django_dbjobs_job").lines()
    assert quiet[1:4] == long.lines()[3:6], "slots and walsenders whatever the transactions' ages"
    assert quiet[4:] == [long.lines()[6]], "many dead rows: shown without a long transaction"
    few = Horizon(tables=[TableRows("django_dbjobs_job", 90000, 999, None, 0, autovacuum=False)])
    assert LongTransactions(few, 60.0, "django_dbjobs_job").lines() == [], "under 1,000 dead rows"
