"""How fast the admin pages load on a big job table.

    .venv/bin/python bench/admin.py                                   # PostgreSQL, 1,000,000 jobs
    .venv/bin/python bench/admin.py --without-index                   # the same, minus (status, finished_at)
    .venv/bin/python bench/admin.py --database mysql://root@127.0.0.1:3306/dbjobs_admin_bench --jobs 200000
    .venv/bin/python bench/admin.py --database sqlite:////tmp/admin-bench.sqlite3 --jobs 100000

The database named in --database is created if missing, migrated, and its job table
filled with --jobs rows of a realistic mix (7 days of jobs: ~95% SUCCESSFUL, 3% FAILED
with a 1 KB traceback, 2% READY, a few hundred RUNNING; 11 job names on 6 queues). The
table is kept: the next run reuses it if it holds exactly --jobs rows (--refill makes it
again, with fresh timestamps). Never point this at a database you care about.

Each page is loaded by a logged-in superuser through django.test.Client (middleware,
session, view, template: everything but the network), once to warm up and --runs more
times. Printed per page: the median and the slowest load, the number of SQL queries and
the slowest one's time. For a page slower than --slow-ms the slowest query is printed
with its plan (EXPLAIN ANALYZE on PostgreSQL, ANALYZE on MariaDB/MySQL).

--without-index drops dbjobs_job_finished_idx (status, finished_at, id) for the measurement
and creates it again afterwards (also at the next start, if a run was killed meanwhile).
See bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.admin_site import ADMIN_APPS, MIDDLEWARE, TEMPLATES  # noqa: E402

DEFAULT_DATABASE = "postgres://root@127.0.0.1:5432/dbjobs_admin_bench"
FINISHED_INDEX = "dbjobs_job_finished_idx"
DAYS = 7
WORKERS = [
    ("web-1:1201:0a1b2c3d", "web-1", 1201, []),
    ("web-2:1187:4e5f6a7b", "web-2", 1187, []),
    ("mail-1:877:8c9d0e1f", "mail-1", 877, ["emails"]),
    ("batch-1:3310:2a3b4c5d", "batch-1", 3310, ["reports", "low"]),
]
#: (name, queue, priority, weight): what the table holds, by share of rows.
JOB_TYPES = [
    ("shop.tasks.send_order_confirmation", "emails", 0, 14),
    ("shop.tasks.send_newsletter", "emails", 0, 8),
    ("billing.tasks.charge_subscription", "default", 0, 12),
    ("billing.tasks.refund_payment", "critical", 10, 0.05),
    ("search.tasks.reindex_product", "default", 0, 20),
    ("crm.tasks.sync_customer", "default", 0, 10),
    ("webhooks.tasks.deliver", "webhooks", 0, 13),
    ("reports.tasks.generate_invoice_pdf", "reports", 0, 9),
    ("reports.tasks.daily_sales", "reports", -10, 0.5),
    ("media.tasks.make_thumbnail", "low", -10, 9),
    ("accounts.tasks.cleanup_sessions", "low", -10, 4.45),
]
ERRORS = [
    "ConnectionError: HTTPSConnectionPool(host='api.example.com', port=443): Max retries exceeded",
    "TimeoutError: the SMTP server did not answer within 30 s",
    "KeyError: 'customer_id'",
    'IntegrityError: duplicate key value violates unique constraint "shop_invoice_number_key"',
]
COLUMNS = (
    "id name args kwargs queue priority status run_at attempts pickups max_attempts worker worker_ids "
    "enqueued_at started_at last_attempted_at finished_at return_value errors last_error unique_key "
    "active_key isolation scheduled_for error_fingerprint"
).split()

urlpatterns: list = []  # ROOT_URLCONF: admin.site.urls, added once Django is set up


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database", default=DEFAULT_DATABASE, help="Database URL (django-environ syntax).")
    parser.add_argument("--jobs", type=int, default=1_000_000, help="Rows in the job table.")
    parser.add_argument("--runs", type=int, default=5, help="Timed loads per page, after one warm-up.")
    parser.add_argument(
        "--without-index",
        action="store_true",
        help=f"Drop {FINISHED_INDEX} while measuring (it is created again afterwards).",
    )
    parser.add_argument("--refill", action="store_true", help="Fill the job table again even if it is full.")
    parser.add_argument(
        "--slow-ms", type=float, default=100.0, help="Explain the slowest query of pages slower than this."
    )
    parser.add_argument("--json", help="Also write the results to this file.")
    options = parser.parse_args()

    configure(options.database)
    from django.db import connection

    from django_dbjobs.models import Job

    ensure_index()
    filled = fill(options.jobs, options.refill)
    add_workers_and_queues()
    pages = pick_pages()
    print_header(filled)
    if options.without_index:
        with connection.schema_editor() as editor:
            editor.remove_index(Job, finished_index())
        print(f"Dropped {FINISHED_INDEX} for this run.")
    try:
        results = measure(pages, options.runs)
        print_table(results, options)
        explain_slow(results, options.slow_ms)
    finally:
        if options.without_index:
            started = time.perf_counter()
            ensure_index()
            print(f"\nCreated {FINISHED_INDEX} again ({time.perf_counter() - started:.1f} s).")
    if options.json:
        Path(options.json).write_text(
            json.dumps(
                {
                    "database": connection.vendor,
                    "jobs": options.jobs,
                    "without_index": options.without_index,
                    "pages": [{key: row[key] for key in row if key != "slowest"} for row in results],
                },
                indent=2,
            )
        )


# Setup


def configure(url: str) -> None:
    """Django settings for the admin on `url`; creates that database if it does not exist."""
    import environ
    from django.conf import settings

    database = environ.Env.db_url_config(url)
    name = Path(str(database["NAME"])).name
    if name in ("dbjobs", "dbjobs.sqlite3") or name.startswith(("test_dbjobs", "test-dbjobs")):
        raise SystemExit(f"Refusing database {name!r}: the test suite uses it. Name a scratch database.")
    vendor = database["ENGINE"].rsplit(".", 1)[-1]
    if vendor == "mysql":
        database["OPTIONS"] = {"charset": "utf8mb4"}
    if vendor == "sqlite3":
        from django_dbjobs.db import SQLITE_RECOMMENDED_OPTIONS

        database["OPTIONS"] = dict(SQLITE_RECOMMENDED_OPTIONS)
    create_database(vendor, database)
    settings.configure(
        DEBUG=False,
        SECRET_KEY="bench-admin-not-secret",
        ALLOWED_HOSTS=["*"],
        USE_TZ=True,
        TIME_ZONE="UTC",
        INSTALLED_APPS=[*ADMIN_APPS, "django.contrib.contenttypes", "django_dbjobs"],
        MIDDLEWARE=MIDDLEWARE,
        ROOT_URLCONF=__name__,
        TEMPLATES=TEMPLATES,
        STATIC_URL="/static/",
        DATABASES={"default": database},
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    )
    import django

    django.setup()
    from django.contrib import admin
    from django.core.management import call_command
    from django.urls import path

    urlpatterns.append(path("admin/", admin.site.urls))
    call_command("migrate", verbosity=0)


def create_database(vendor: str, database: dict) -> None:
    name = database["NAME"]
    if vendor == "postgresql":
        import psycopg
        from psycopg import sql

        with psycopg.connect(
            dbname="postgres",
            host=database["HOST"] or None,
            port=database["PORT"] or None,
            user=database["USER"] or None,
            password=database["PASSWORD"] or None,
            autocommit=True,
        ) as server:
            if not server.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
                server.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
                print(f"Created database {name}.")
    elif vendor == "mysql":
        import MySQLdb

        server = MySQLdb.connect(
            host=database["HOST"] or "localhost",
            port=int(database["PORT"] or 3306),
            user=database["USER"],
            password=database["PASSWORD"] or "",
        )
        try:
            server.cursor().execute(
                f"CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
            )
        finally:
            server.close()


def finished_index():
    from django_dbjobs.models import Job

    return next(index for index in Job._meta.indexes if index.name == FINISHED_INDEX)


def ensure_index() -> None:
    """Create the (status, finished_at) index if a run with --without-index left without doing so."""
    from django.db import connection

    from django_dbjobs.models import Job

    with connection.cursor() as cursor:
        present = connection.introspection.get_constraints(cursor, Job._meta.db_table)
    if FINISHED_INDEX not in present:
        with connection.schema_editor() as editor:
            editor.add_index(Job, finished_index())


# The rows


def uuid7(millis: int, sequence: int, random_bits: int) -> str:
    """A UUIDv7 string for a given time, as django_dbjobs.models.ids.new_id() makes for the current one."""
    value = millis << 80 | 0x7 << 76 | (sequence & 0xFFF) << 64 | 0b10 << 62 | random_bits
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def traceback_text(summary: str, rng: random.Random) -> str:
    """About 1 KB of a plausible traceback ending in `summary`."""
    frames = [
        ("/app/.venv/lib/python3.13/site-packages/django_dbjobs/execution.py", 131, "run_one"),
        ("/app/shop/tasks.py", rng.randrange(20, 400), "send_order_confirmation"),
        ("/app/shop/mail.py", rng.randrange(20, 400), "deliver"),
        ("/app/.venv/lib/python3.13/site-packages/requests/api.py", 59, "request"),
        ("/app/.venv/lib/python3.13/site-packages/requests/sessions.py", 589, "request"),
        ("/app/.venv/lib/python3.13/site-packages/requests/adapters.py", 700, "send"),
    ]
    lines = ["Traceback (most recent call last):"]
    for path, line, function in frames:
        lines.append(f'  File "{path}", line {line}, in {function}')
        lines.append(f"    result = {function}(*args, **kwargs)")
    lines.append(summary)
    return "\n".join(lines) + "\n"


def job_rows(count: int, now: datetime.datetime, naive: bool):
    """`count` job rows (tuples in COLUMNS order), oldest first; ids in enqueue-time order.

    Enqueued evenly over the last DAYS days (about 6,000 an hour at 1,000,000 jobs).
    The last 3,000 hold 300 RUNNING jobs; otherwise 3% FAILED (one error with its
    traceback), 1% READY and due (waiting since they were enqueued), 1% READY later
    (due within a day), the rest SUCCESSFUL, finished seconds after they were enqueued.
    """
    rng = random.Random(20261201)
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    now_ms = int((now - epoch).total_seconds() * 1000)
    span_ms = DAYS * 86_400_000
    start_ms = now_ms - span_ms
    types = rng.choices(JOB_TYPES, weights=[weight for *_, weight in JOB_TYPES], k=count)
    from django_dbjobs.observability.fingerprints import fingerprint

    tracebacks = {summary: traceback_text(summary, rng) for summary in ERRORS}
    causes = {
        summary: fingerprint(
            {
                "exception_class_path": "builtins." + summary.split(":")[0],
                "summary": summary,
                "traceback": tracebacks[summary],
            }
        )
        for summary in ERRORS
    }
    worker_ids = [worker[0] for worker in WORKERS]
    running_from = count - 3000

    def stamp(value: datetime.datetime | None):
        if value is None or not naive:
            return value
        return value.replace(tzinfo=None).isoformat(sep=" ")

    for number in range(count):
        millis = start_ms + number * span_ms // count
        enqueued = epoch + datetime.timedelta(milliseconds=millis)
        name, queue, priority, _weight = types[number]
        job_id = uuid7(millis, number, rng.getrandbits(62))
        draw = rng.random()
        if number >= running_from and number % 10 == 0:
            status = "RUNNING"
        elif draw < 0.03:
            status = "FAILED"
        elif draw < 0.05:
            status = "READY"
        else:
            status = "SUCCESSFUL"
        worker = rng.choice(worker_ids)
        run_at = enqueued
        started = enqueued + datetime.timedelta(seconds=rng.uniform(0.005, 1.5))
        attempts, finished, return_value, errors, last_error = 1, None, None, "[]", ""
        workers = [worker]
        if status == "SUCCESSFUL":
            finished = min(started + datetime.timedelta(seconds=rng.expovariate(2.0)), now)
            return_value = json.dumps({"ok": True, "id": number}) if number % 3 else None
        elif status == "FAILED":
            attempts = 3
            workers = [rng.choice(worker_ids) for _ in range(3)]
            worker = workers[-1]
            finished = min(started + datetime.timedelta(seconds=6 + rng.uniform(0, 30)), now)
            last_error = rng.choice(ERRORS)
            error = {
                "exception_class_path": "builtins." + last_error.split(":")[0],
                "traceback": tracebacks[last_error],
                "summary": last_error,
                "attempt": 3,
                "worker": worker,
                "at": finished.isoformat(),
            }
            errors = json.dumps([error])
        elif status == "READY":
            attempts, worker, workers, started = 0, None, [], None
            if draw >= 0.04:  # later: a scheduled ETA, or a retry's backoff
                run_at = now + datetime.timedelta(seconds=rng.uniform(60, 86_400))
        else:  # RUNNING
            worker = worker_ids[number % len(worker_ids)]
            workers = [worker]
        unique_key = f"customer:{number}" if name == "crm.tasks.sync_customer" else None
        yield (
            job_id,
            name,
            json.dumps([number % 100_000]),
            json.dumps({"account_id": number % 7919, "locale": "en"}),
            queue,
            priority,
            status,
            stamp(run_at),
            attempts,
            attempts,
            3,
            worker,
            json.dumps(workers),
            stamp(enqueued),
            stamp(started),
            stamp(started),
            stamp(finished),
            return_value,
            errors,
            last_error,
            unique_key,
            unique_key if status in ("READY", "RUNNING") else None,
            "",
            None,
            causes[last_error] if status == "FAILED" else None,
        )


def fill(count: int, refill: bool) -> dict:
    """Make the job table hold `count` rows (unless it already does); ANALYZE it. Return what was done."""
    from django.db import connection, transaction
    from django.utils import timezone

    from django_dbjobs.models import Job

    table = Job._meta.db_table
    existing = Job.objects.count()
    if existing == count and not refill:
        newest = Job.objects.order_by("-pk").values_list("enqueued_at", flat=True).first()
        return {"reused": True, "newest": newest, "seconds": 0.0}
    started = time.perf_counter()
    print(f"Filling {table} with {count:,} jobs (it had {existing:,})...", flush=True)
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(f"DELETE FROM {table}")
        else:
            cursor.execute(f"TRUNCATE TABLE {connection.ops.quote_name(table)}")
    now = timezone.now()
    columns = ", ".join(connection.ops.quote_name(column) for column in COLUMNS)
    rows = job_rows(count, now, naive=connection.vendor != "postgresql")
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:  # mysqlclient turns executemany() into multi-row INSERTs
            insert = f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(COLUMNS))})"
            batch = []
            for row in rows:
                batch.append(row)
                if len(batch) == 2000:
                    cursor.executemany(insert, batch)
                    batch = []
            if batch:
                cursor.executemany(insert, batch)
    loaded = time.perf_counter() - started
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"VACUUM (ANALYZE) {table}")  # as autovacuum would have, long since
        elif connection.vendor == "mysql":
            cursor.execute(f"ANALYZE TABLE {table}")
            cursor.fetchall()
        else:
            cursor.execute("ANALYZE")
    return {"reused": False, "newest": now, "seconds": time.perf_counter() - started, "load": loaded}


def add_workers_and_queues() -> None:
    """Four live workers (the RUNNING jobs' owners), a superuser, and the queue `low` paused."""
    from django.contrib.auth.models import User
    from django.db.models.functions import Now

    from django_dbjobs.models import Queue, WorkerProcess

    for worker_id, hostname, pid, queues in WORKERS:
        WorkerProcess.objects.update_or_create(
            id=worker_id,
            defaults={
                "hostname": hostname,
                "pid": pid,
                "queues": queues,
                "concurrency": 8,
                "heartbeat_at": Now(),
            },
        )
    Queue.objects.pause(["low"], by="bench")
    User.objects.update_or_create(
        username="bench-admin", defaults={"is_staff": True, "is_superuser": True, "email": ""}
    )
    # 50 more users: Django's own user list of 50 rows, the cost of an admin list page itself.
    User.objects.bulk_create(
        [User(username=f"bench-user-{number:02}", email=f"user{number}@example.com") for number in range(50)],
        ignore_conflicts=True,
    )


def pick_pages() -> list[tuple[str, str]]:
    """(label, URL) of each page to load; labels starting with '+' are extra cases."""
    from django.utils import timezone

    from django_dbjobs.models import Job, JobStatus

    jobs = Job.objects.order_by("-pk")
    oldest = timezone.localtime(Job.objects.order_by("pk").values_list("enqueued_at", flat=True).first())
    newest = timezone.localtime(jobs.values_list("enqueued_at", flat=True).first())
    # Rows some way down the list (on small tables, the oldest of their kind).
    one = list(jobs.filter(status=JobStatus.SUCCESSFUL).values_list("pk", flat=True)[:5001])[-1]
    failed = list(jobs.filter(status=JobStatus.FAILED).values_list("pk", flat=True)[:501])[-1]
    cause = Job.objects.get(pk=failed).error_fingerprint
    keyed = list(jobs.filter(name="crm.tasks.sync_customer").values_list("unique_key", flat=True)[:20001])[-1]
    base = "/admin/django_dbjobs/"

    def job_list(**query) -> str:
        return f"{base}job/?{urlencode(query)}" if query else f"{base}job/"

    month = {"enqueued_at__year": oldest.year, "enqueued_at__month": oldest.month}
    last_day = {
        "enqueued_at__year": newest.year,
        "enqueued_at__month": newest.month,
        "enqueued_at__day": newest.day,
    }
    return [
        ("job list", job_list()),
        ("job list, status=FAILED", job_list(status__exact="FAILED")),
        ("job list, queue=emails", job_list(queue="emails")),
        ("job list, search exact id", job_list(q=one)),
        ("job list, search job name", job_list(q="crm.tasks.sync_customer")),
        ("job list, date drill-down (month)", job_list(**month)),
        ("job detail", f"{base}job/{one}/change/"),
        ("dead letters", f"{base}failedjob/"),
        ("dead letters, queue=emails", f"{base}failedjob/?queue=emails"),
        ("dead-letter detail", f"{base}failedjob/{failed}/change/"),
        ("dead letters by cause", f"{base}failuregroup/"),
        ("dead letters, one cause", f"{base}failedjob/?cause={cause}"),
        ("retry a cause, confirmation", f"{base}failuregroup/retry/?cause={cause}"),
        ("overview", f"{base}overview/"),
        ("queues", f"{base}queue/"),
        ("workers", f"{base}workerprocess/"),
        ("+ job list, queue=critical (0.05%)", job_list(queue="critical")),
        ("+ job list, status=READY", job_list(status__exact="READY")),
        ("+ job list, search unique key", job_list(q=keyed)),
        ("+ job list, search, no match", job_list(q="shop.tasks.no_such_job")),
        ("+ job list, date drill-down (oldest day)", job_list(**month, enqueued_at__day=oldest.day)),
        ("+ job list, date drill-down (newest day)", job_list(**last_day)),
        ("+ dead letters, queue=critical", f"{base}failedjob/?queue=critical"),
        ("+ worker's running jobs", job_list(status="RUNNING", worker=WORKERS[0][0])),
        ("+ baseline: Django's user list, 50 rows", "/admin/auth/user/"),
    ]


# Measuring


class QueryTimer:
    """An execute_wrapper that records (milliseconds, sql, params) of every query."""

    def __init__(self):
        self.queries: list[tuple[float, str, object]] = []

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.queries.append(((time.perf_counter() - started) * 1000, sql, params))


def timed_loads(client, url: str, runs: int, label: str):
    """(milliseconds, queries) of each of `runs` loads of `url` after a warm-up, and the last response."""
    from django.db import connection

    loads = []
    for run in range(runs + 1):
        timer = QueryTimer()
        started = time.perf_counter()
        with connection.execute_wrapper(timer):
            response = client.get(url)
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != 200:
            raise SystemExit(f"{label}: {url} answered HTTP {response.status_code}")
        if run:  # the first load warms caches up
            loads.append((elapsed, timer.queries))
    return loads, response


def measure(pages: list[tuple[str, str]], runs: int) -> list[dict]:
    from django.contrib.auth.models import User
    from django.test import Client

    client = Client()
    client.force_login(User.objects.get(username="bench-admin"))
    results = []
    for label, url in pages:
        loads, _response = timed_loads(client, url, runs, label)
        times = [elapsed for elapsed, _queries in loads]
        slowest = [max(queries, key=lambda query: query[0]) for _elapsed, queries in loads]
        results.append(
            {
                "page": label,
                "url": url,
                "median_ms": statistics.median(times),
                "min_ms": min(times),
                "max_ms": max(times),
                "queries": len(loads[-1][1]),
                "slowest_query_ms": statistics.median(query[0] for query in slowest),
                "sql_ms": statistics.median(sum(query[0] for query in queries) for _e, queries in loads),
                "samples_ms": times,
                "slowest": max(slowest, key=lambda query: query[0]),
            }
        )
        print(f"  {label}: {results[-1]['median_ms']:.1f} ms", flush=True)
    return results


def print_header(filled: dict) -> None:
    from django.db import connection
    from django.utils import timezone

    from django_dbjobs.models import Job

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT version(), pg_size_pretty(pg_total_relation_size(%s)), "
                "current_setting('shared_buffers'), current_setting('work_mem'), current_setting('jit')",
                [Job._meta.db_table],
            )
            version, size, buffers, work_mem, jit = cursor.fetchone()
            server = f"{version.split(' on ')[0]}; shared_buffers {buffers}, work_mem {work_mem}, jit {jit}"
        elif connection.vendor == "mysql":
            cursor.execute(
                "SELECT VERSION(), (SELECT data_length + index_length FROM information_schema.tables "
                "WHERE table_schema = DATABASE() AND table_name = %s), @@innodb_buffer_pool_size",
                [Job._meta.db_table],
            )
            version, size, pool = cursor.fetchone()
            server, size = (
                f"MySQL/MariaDB {version}; innodb_buffer_pool_size {pool >> 20} MB",
                f"{size >> 20} MB",
            )
        else:
            server, size = "SQLite", ""
    count = Job.objects.count()
    if filled["reused"]:
        age = timezone.now() - filled["newest"]
        how = f"reused (newest job enqueued {age.total_seconds() / 3600:.1f} h ago; --refill to renew)"
    else:
        how = f"filled in {filled['seconds']:.0f} s ({filled['load']:.0f} s loading, the rest VACUUM/ANALYZE)"
    print(f"\n{server}; {os.cpu_count()} cores")
    print(f"Job table: {count:,} rows, {size}, {how}")


def print_table(results: list[dict], options) -> None:
    from django.db import connection

    index = "WITHOUT" if options.without_index else "with"
    print(f"\nAdmin pages on {connection.vendor}, {options.jobs:,} jobs, {index} {FINISHED_INDEX}")
    print(f"median of {options.runs} loads after a warm-up; + marks cases beyond the basic list\n")
    header = (
        f"{'page':<42} {'median ms':>9} {'min ms':>7} {'max ms':>7} {'queries':>7} "
        f"{'slowest q ms':>12} {'all SQL ms':>10}"
    )
    print(header)
    print("-" * len(header))
    for row in results:
        print(
            f"{row['page']:<42} {row['median_ms']:>9.1f} {row['min_ms']:>7.1f} {row['max_ms']:>7.1f} "
            f"{row['queries']:>7} {row['slowest_query_ms']:>12.1f} {row['sql_ms']:>10.1f}"
        )
    print("(slowest q ms and all SQL ms: medians over the loads; the rest of a load is Python and templates)")


def explain_prefix() -> str:
    """What runs a query and shows its plan: with its real counts, except on SQLite."""
    from django.db import connection

    if connection.vendor == "mysql":
        return "ANALYZE " if connection.mysql_is_mariadb else "EXPLAIN ANALYZE "
    return {"postgresql": "EXPLAIN (ANALYZE, BUFFERS) ", "sqlite": "EXPLAIN QUERY PLAN "}[connection.vendor]


def explain_slow(results: list[dict], slow_ms: float) -> None:
    """The slowest query of each page slower than `slow_ms`, with its plan."""
    from django.db import connection

    prefix = explain_prefix()
    for row in results:
        if row["median_ms"] <= slow_ms:
            continue
        elapsed, sql, params = row["slowest"]
        with connection.cursor() as cursor:
            cursor.execute(prefix + sql, params)
            plan = cursor.fetchall()
            headers = [column[0] for column in cursor.description]
            executed = connection.ops.last_executed_query(cursor.cursor, prefix + sql, params)
        print(
            f"\n== {row['page']}: {row['median_ms']:.0f} ms, of which SQL {row['sql_ms']:.0f} ms; "
            f"slowest query {elapsed:.1f} ms ({row['url']})"
        )
        print(executed[len(prefix) :] if executed.startswith(prefix) else executed)
        if connection.vendor == "postgresql":
            print("\n".join(line for (line,) in plan))
        else:
            print(" | ".join(headers))
            for line in plan:
                print(" | ".join("" if value is None else str(value) for value in line))


if __name__ == "__main__":
    main()
