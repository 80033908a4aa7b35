"""Settings for the benchmark: BENCH_DATABASE_URL picks the server; a scratch database is created on it."""

import os

import environ

from django_dbjobs.db import SQLITE_RECOMMENDED_OPTIONS

env = environ.Env()
SECRET_KEY = "bench"
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "django_dbjobs", "bench"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

_db = env.db("BENCH_DATABASE_URL", default="sqlite:////tmp/dbjobs-bench.sqlite3")
if _db["ENGINE"].endswith("sqlite3"):
    _db["OPTIONS"] = dict(SQLITE_RECOMMENDED_OPTIONS)
    _db["TEST"] = {"NAME": _db["NAME"].replace(".sqlite3", "") + "-scratch.sqlite3"}
elif _db["ENGINE"].endswith("mysql"):
    _db["OPTIONS"] = {"charset": "utf8mb4"}
    _db["TEST"] = {"CHARSET": "utf8mb4", "COLLATION": "utf8mb4_unicode_ci"}
if os.environ.get("BENCH_SCRATCH_NAME"):  # worker subprocesses: the scratch database
    _db["NAME"] = os.environ["BENCH_SCRATCH_NAME"]
DATABASES = {"default": _db}
# bench/fleet.py's workers: 'default' through its PgBouncer (transaction mode, on this port, the
# database under the same name), without server-side cursors as Django asks for transaction
# pooling; BENCH_LISTEN_DIRECT=1 adds the direct alias they LISTEN on.
if os.environ.get("BENCH_POOLER_PORT"):
    _direct = dict(_db)
    _db.update(HOST="127.0.0.1", PORT=int(os.environ["BENCH_POOLER_PORT"]), DISABLE_SERVER_SIDE_CURSORS=True)
    if os.environ.get("BENCH_LISTEN_DIRECT"):
        DATABASES["direct"] = _direct
        DBJOBS_LISTEN_DATABASE = "direct"
# PostgreSQL: BENCH_PREPARED_STATEMENTS=0 measures without prepared statements.
DBJOBS_PREPARED_STATEMENTS = env.bool("BENCH_PREPARED_STATEMENTS", default=True)
# PostgreSQL: BENCH_ASYNC_CLAIM_COMMIT=1 commits claims without waiting for the WAL flush.
DBJOBS_ASYNC_CLAIM_COMMIT = env.bool("BENCH_ASYNC_CLAIM_COMMIT", default=False)
# BENCH_TRACING=1: this worker traces with the OpenTelemetry SDK, its spans dropped (bench/tracing.py).
if os.environ.get("BENCH_TRACING"):
    from bench.tracing import set_up_worker

    set_up_worker()
# bench/sustained.py: how long finished jobs are kept (seconds), so retention runs during the bench.
if os.environ.get("BENCH_KEEP_SUCCEEDED"):
    DBJOBS_KEEP_SUCCEEDED = float(os.environ["BENCH_KEEP_SUCCEEDED"])
    DBJOBS_KEEP_FAILED = float(os.environ["BENCH_KEEP_SUCCEEDED"])
