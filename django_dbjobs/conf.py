"""Settings for django_dbjobs, with their defaults.

Every setting is read from ``django.conf.settings`` with the ``DBJOBS_`` prefix when
first used, then kept: enqueue() and the worker read some on every job. Changing a
setting with ``override_settings`` (Django's ``setting_changed`` signal) drops the
kept values, so tests see the new ones.
"""

from django.conf import settings as django_settings
from django.core.signals import setting_changed

DEFAULTS = {
    # Queues a job may be enqueued on; None accepts any valid queue name.
    "QUEUES": None,
    "DEFAULT_QUEUE": "default",
    "DEFAULT_PRIORITY": 0,
    "DEFAULT_MAX_ATTEMPTS": 3,
    # Retry delay: RETRY_BACKOFF * 2 ** (attempt - 1) seconds, capped, with jitter.
    "RETRY_BACKOFF": 2.0,
    "RETRY_BACKOFF_MAX": 3600.0,
    # Largest JSON payload (args + kwargs) accepted by enqueue(), in bytes.
    "MAX_PAYLOAD_BYTES": 1_048_576,
    # Largest state current_job().checkpoint() stores, as JSON, in bytes.
    "MAX_CHECKPOINT_BYTES": 65_536,
    # Seconds an idle worker waits between checks for due jobs.
    "POLL_INTERVAL": 1.0,
    # Most jobs a worker claims beyond its free threads. The prefetch adapts: about as
    # many jobs as finished in the last 0.1 s, so slow jobs are never hoarded.
    "PREFETCH": 100,
    # Successes stored in one UPDATE: at most this many, at most this many seconds late.
    "ACK_BATCH_SIZE": 100,
    "ACK_DELAY": 0.05,
    # Seconds a stopping worker waits for running jobs before releasing them.
    "SHUTDOWN_GRACE": 20.0,
    # Seconds between a worker's heartbeats (its own thread and connection).
    "HEARTBEAT_INTERVAL": 5.0,
    # A worker silent for this long is presumed dead and its jobs are recovered.
    "HEARTBEAT_TIMEOUT": 30.0,
    # Seconds between a worker's sweeps for jobs of dead workers.
    "SWEEP_INTERVAL": 10.0,
    # Seconds after its enqueue that a job no worker knows is dead-lettered; until then
    # it goes back for a worker that knows it (a rolling deploy).
    "UNKNOWN_JOB_GRACE": 3600.0,
    # Extra modules the worker imports so their @job functions are registered.
    "JOB_MODULES": [],
    # Cron schedules: {name: {"job": ..., "cron": ..., ...}}, synced when a worker starts.
    "SCHEDULES": {},
    # Seconds between a scheduler's reads of the schedule table when nothing is due
    # sooner (it also wakes at each due time, and when a schedule is saved).
    "SCHEDULE_CHECK_INTERVAL": 10.0,
    # The admin masks keyword arguments (and positional ones, by parameter name) whose
    # name contains one of these, at any depth of a dict, case-insensitively.
    "ADMIN_MASKED_ARGUMENTS": [
        "password",
        "passwd",
        "secret",
        "token",
        "api_key",
        "apikey",
        "private_key",
        "signature",
        "credential",
    ],
    # Jobs whose arguments and return value the admin never shows.
    "ADMIN_MASKED_JOBS": [],
    # Seconds a job may run before it is interrupted, for jobs without @job(timeout=...);
    # None: no timeout.
    "DEFAULT_TIMEOUT": None,
    # Finished jobs are deleted by workers once older than this (seconds or a timedelta;
    # None keeps them forever): successes after a week, dead letters after 30 days.
    "KEEP_SUCCEEDED": 7 * 86400,
    "KEEP_FAILED": 30 * 86400,
    # Dotted path of a function called at enqueue, returning a small JSON dict (a request
    # id, a tenant) stored with the job; None: language and timezone only.
    "CONTEXT_CAPTURE": None,
    # Dotted path of a function taking that dict and returning a context manager, entered
    # around the job's run; None: nothing to restore beyond language and timezone.
    "CONTEXT_RESTORE": None,
    # Limits per queue, shared by every worker: {"emails": {"rate": "100/m"}} starts at most
    # 100 jobs of the queue in any minute (docs/flow-control.rst).
    "QUEUE_LIMITS": {},
    # PostgreSQL: commit claims without waiting for the WAL flush (faster wake-ups; a
    # crash of the database server can lose a claim made just before it: reliability.rst).
    "ASYNC_CLAIM_COMMIT": False,
    # PostgreSQL: run the worker's claim and enqueue()'s INSERT (in autocommit) as prepared
    # statements (db/prepared.py); Django's DISABLE_SERVER_SIDE_CURSORS (transaction
    # pooling) turns them off too.
    "PREPARED_STATEMENTS": True,
    # PostgreSQL: the DATABASES alias workers LISTEN on for new jobs, a direct connection
    # to their database beside a pooled one, or a dict {worker alias: LISTEN alias}; None (or
    # no entry): the worker's own. Unnamed, a worker whose LISTEN goes through a pooler probes
    # instead (worker/lifecycle/idle_wait.py); named, it is proved by a handshake first.
    "LISTEN_DATABASE": None,
    # The token a scraper sends (Authorization: Bearer <token>) to read the database gauges
    # (observability/gauges_view.py); None or "": staff users only.
    "METRICS_TOKEN": None,
    # Trace enqueues and runs with OpenTelemetry when the project has set up a tracer
    # provider (docs/observability.rst); False: never, even then.
    "TRACING": True,
}


class Settings:
    """Read ``DBJOBS_<NAME>`` from Django settings, falling back to the default."""

    def __init__(self):
        self._values: dict = {}
        self._derived: list = []

    def __getattr__(self, name: str):
        # Only called for names not set on the instance: the settings themselves.
        try:
            return self._values[name]
        except KeyError:
            pass
        if name not in DEFAULTS:
            raise AttributeError(f"Unknown django_dbjobs setting: {name}")
        value = self._values[name] = getattr(django_settings, f"DBJOBS_{name}", DEFAULTS[name])
        return value

    def reload(self) -> None:
        """Forget the values read so far; the next use reads Django's settings again."""
        self._values.clear()
        for forget in self._derived:
            forget()

    def on_reload(self, forget) -> None:
        """Have `forget()` called whenever the settings are read again: it drops what was
        worked out from them."""
        self._derived.append(forget)


settings = Settings()


def _setting_changed(setting: str, **kwargs) -> None:
    if setting.startswith("DBJOBS_"):
        settings.reload()


setting_changed.connect(_setting_changed, dispatch_uid="django_dbjobs.conf")
