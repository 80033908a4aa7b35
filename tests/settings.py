"""Settings for the test suite; the database comes from DBJOBS_TEST_DATABASE_URL.

Worker subprocesses started by the tests use the same settings, with
DBJOBS_TEST_DATABASE_NAME pointing them at the test database pytest created.
"""

import os
from pathlib import Path

import environ

from django_dbjobs.db import SQLITE_RECOMMENDED_OPTIONS

BASE_DIR = Path(__file__).resolve().parent
env = environ.Env()

SECRET_KEY = "tests-only-not-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
ALLOWED_HOSTS = ["*"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django_dbjobs",
    "tests",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "tests.urls"
# The live_server fixture (the real Prometheus test scrapes the gauges view through it)
# serves static files under it.
STATIC_URL = "/static/"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

_default = env.db("DBJOBS_TEST_DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'dbjobs.sqlite3'}")
if _default["ENGINE"].endswith("sqlite3"):
    _default["OPTIONS"] = dict(SQLITE_RECOMMENDED_OPTIONS)
    _default["TEST"] = {"NAME": str(BASE_DIR / f"test-dbjobs-{os.getpid()}.sqlite3")}
elif _default["ENGINE"].endswith("mysql"):
    _default["OPTIONS"] = {"charset": "utf8mb4"}
    _default["TEST"] = {"CHARSET": "utf8mb4", "COLLATION": "utf8mb4_unicode_ci"}
if os.environ.get("DBJOBS_TEST_DATABASE_NAME"):
    _default["NAME"] = os.environ["DBJOBS_TEST_DATABASE_NAME"]
DATABASES = {"default": _default}
# DBJOBS_TEST_POOLED=<JSON>: 'default' goes through a pooler (tests/test_pgbouncer.py): these
# keys replace its own (HOST, PORT, NAME...), and the database stays reachable as 'direct'.
if os.environ.get("DBJOBS_TEST_POOLED"):
    import json

    DATABASES = {"default": {**_default, **json.loads(os.environ["DBJOBS_TEST_POOLED"])}, "direct": _default}
if os.environ.get("DBJOBS_TEST_LISTEN_DATABASE"):
    DBJOBS_LISTEN_DATABASE = os.environ["DBJOBS_TEST_LISTEN_DATABASE"]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

DBJOBS_POLL_INTERVAL = float(os.environ.get("DBJOBS_TEST_POLL_INTERVAL", 0.2))
DBJOBS_RETRY_BACKOFF = 0.05
DBJOBS_RETRY_BACKOFF_MAX = 0.2
# Short leases so recovery tests take seconds; the bound is timeout + sweep interval.
DBJOBS_HEARTBEAT_INTERVAL = 0.2
DBJOBS_HEARTBEAT_TIMEOUT = 1.5
DBJOBS_SWEEP_INTERVAL = 0.3

# DBJOBS_TEST_CLOCK_SKEW=<seconds> runs this process with a wrong host clock, to show
# that leases and due times are judged by the database clock only.
if os.environ.get("DBJOBS_TEST_CLOCK_SKEW"):
    import time

    import django.utils.timezone

    _skew = float(os.environ["DBJOBS_TEST_CLOCK_SKEW"])
    _real_time, _real_now = time.time, django.utils.timezone.now
    time.time = lambda: _real_time() + _skew
    django.utils.timezone.now = lambda: _real_now() + __import__("datetime").timedelta(seconds=_skew)

# DBJOBS_TEST_ACK_DELAY=<seconds> holds successes back longer, for the kill -9 test.
if os.environ.get("DBJOBS_TEST_ACK_DELAY"):
    DBJOBS_ACK_DELAY = float(os.environ["DBJOBS_TEST_ACK_DELAY"])
    DBJOBS_ACK_BATCH_SIZE = 100_000

# DBJOBS_TEST_NEW_RELEASE=1: this worker runs the "new release" (knows tests.new_release).
if os.environ.get("DBJOBS_TEST_NEW_RELEASE"):
    DBJOBS_JOB_MODULES = ["tests.new_release"]
if os.environ.get("DBJOBS_TEST_UNKNOWN_JOB_GRACE"):
    DBJOBS_UNKNOWN_JOB_GRACE = float(os.environ["DBJOBS_TEST_UNKNOWN_JOB_GRACE"])

# DBJOBS_TEST_SCHEDULES=<JSON>: this worker's DBJOBS_SCHEDULES.
if os.environ.get("DBJOBS_TEST_SCHEDULES"):
    import json

    DBJOBS_SCHEDULES = json.loads(os.environ["DBJOBS_TEST_SCHEDULES"])
if os.environ.get("DBJOBS_TEST_SCHEDULE_CHECK_INTERVAL"):
    DBJOBS_SCHEDULE_CHECK_INTERVAL = float(os.environ["DBJOBS_TEST_SCHEDULE_CHECK_INTERVAL"])

# Django's Tasks framework (django.tasks on Django 6, the django-tasks backport on 5.2).
TASKS = {
    "default": {
        "BACKEND": "django_dbjobs.backend.DatabaseBackend",
        "QUEUES": ["default", "emails"],
        "OPTIONS": {"max_attempts": 3},
    },
    # Another backend's task must never be run by our workers (promise 11).
    "immediate": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"},
}
try:
    import django.tasks  # noqa: F401
except ImportError:
    TASKS["immediate"]["BACKEND"] = "django_tasks.backends.immediate.ImmediateBackend"
LANGUAGES = [("en", "English"), ("fr", "French"), ("de", "German")]
if os.environ.get("DBJOBS_TEST_CONTEXT_HOOKS"):
    DBJOBS_CONTEXT_CAPTURE = "tests.context_hooks.capture"
    DBJOBS_CONTEXT_RESTORE = "tests.context_hooks.restore"

# Supervisor tests (run_jobs --processes): children that die at start, and short restart pauses.
if os.environ.get("DBJOBS_TEST_CHILD_CRASH") and os.environ.get("DBJOBS_SUPERVISOR_PID"):
    raise SystemExit(3)
if os.environ.get("DBJOBS_TEST_RESTART_PAUSE"):
    import django_dbjobs.worker.lifecycle.supervisor as _supervisor

    _supervisor.RESTART_PAUSE = float(os.environ["DBJOBS_TEST_RESTART_PAUSE"])
if os.environ.get("DBJOBS_TEST_STUCK_AFTER"):
    import django_dbjobs.worker.running.deadlines as _deadlines

    _deadlines.STUCK_AFTER = float(os.environ["DBJOBS_TEST_STUCK_AFTER"])
# DBJOBS_TEST_QUEUE_LIMITS=<JSON>: this worker's DBJOBS_QUEUE_LIMITS.
if os.environ.get("DBJOBS_TEST_QUEUE_LIMITS"):
    import json

    DBJOBS_QUEUE_LIMITS = json.loads(os.environ["DBJOBS_TEST_QUEUE_LIMITS"])

# DBJOBS_TEST_JSON_LOG=<path>: this process writes the django_dbjobs logger's lines to
# <path>, one JSON object a line with the log fields (tests/test_log_fields.py).
if os.environ.get("DBJOBS_TEST_JSON_LOG"):
    LOGGING = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "tests.json_log.JsonFormatter"}},
        "handlers": {
            "file": {
                "class": "logging.FileHandler",
                "filename": os.environ["DBJOBS_TEST_JSON_LOG"],
                "formatter": "json",
            }
        },
        "loggers": {"django_dbjobs": {"handlers": ["file"], "level": "DEBUG"}},
    }

# DBJOBS_TEST_TRACE_FILE=<path>: this process traces with the OpenTelemetry SDK, writing
# its spans to that file (tests/trace_export.py).
if os.environ.get("DBJOBS_TEST_TRACE_FILE"):
    from tests import trace_export

    trace_export.set_up(os.environ["DBJOBS_TEST_TRACE_FILE"])

# Every test process (run_jobs subprocesses included) prints all its threads' stacks on
# SIGUSR2: a test that finds jobs stuck under a live worker asks it where it is
# (tests/test_workflow_workers.py stuck()).
import faulthandler as _faulthandler  # noqa: E402
import signal as _signal  # noqa: E402

_faulthandler.register(_signal.SIGUSR2, all_threads=True)
