"""Job functions used by the tests; autodiscovered as the `jobs` module of the tests app."""

import os
import signal
import sys
import time

from django_dbjobs import current_job, job
from tests.reexported_job import reexported  # noqa: F401 - a job workers know through this module

# DBJOBS_TEST_DRAINED_RECHECK=<seconds>: this worker's pause after a short claim (worker/lifecycle/loop.py);
# set here, the module every test worker imports once its apps are ready.
if os.environ.get("DBJOBS_TEST_DRAINED_RECHECK"):
    from django_dbjobs.worker.lifecycle import loop as _loop

    _loop.DRAINED_RECHECK = float(os.environ["DBJOBS_TEST_DRAINED_RECHECK"])


@job
def add(a, b):
    return a + b


@job
def echo(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


@job(queue="emails", priority=5, max_attempts=7)
def send_email(address):
    return address


@job(max_attempts=3)
def always_fails(message="boom"):
    raise ValueError(message)


@job(max_attempts=3)
def fails_until_attempt(n):
    attempt = current_job().attempts
    if attempt < n:
        raise ConnectionError(f"attempt {attempt} failed")
    return attempt


@job(max_attempts=2)
def raises_system_exit():
    raise SystemExit(3)


@job(max_attempts=1)
def error_with_odd_bytes():
    raise RuntimeError("bad \x00 byte and lone \udcff surrogate")


@job(max_attempts=1)
def returns_unserialisable():
    return object()


@job
def record(value):
    """Append `value` to the file named by DBJOBS_TEST_RECORD (one write per line)."""
    line = f"{value}\n".encode()
    fd = os.open(os.environ["DBJOBS_TEST_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return value


@job
def sleep_then_record(seconds, value):
    time.sleep(seconds)
    return record(value)


@job
def announce_sleep_record(seconds, value):
    """Record `started:<value>`, sleep, then record `value` (the test knows the job has begun)."""
    record(f"started:{value}")
    time.sleep(seconds)
    return record(value)


@job
def blocked_signals():
    """The signals blocked in the thread running this job."""
    return sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, []))


def not_registered(x):
    return x


@job(max_attempts=3)
def kill_own_worker():
    """A poison job: kills the process running it, every time."""
    os.kill(os.getpid(), signal.SIGKILL)


@job(max_attempts=2)
def exit_process():
    """Calls os._exit, which no except clause can catch."""
    os._exit(1)


def unstorable_value():
    """A value this database refuses, once past the worker's own cleaning of return values.

    MariaDB refuses JSON nested 32 deep of its own accord; PostgreSQL refuses a lone
    surrogate. SQLite refuses neither: there it is an object JSON cannot write (which the
    worker's size check refuses in a worker, and Django's JSONField in a direct write).
    """
    from django.db import connection

    if connection.vendor == "mysql":
        value = []
        for _ in range(40):
            value = [value]
        return value
    if connection.vendor == "postgresql":
        return "lone \ud800 surrogate"
    return {"not json": object()}


@job(max_attempts=1)
def returns_unstorable():
    """Returns unstorable_value() (the DBJOBS_TEST_RAW_RESULTS hook below lets it reach the database)."""
    return unstorable_value()


@job
def count_jobs():
    """Uses the database from inside the job."""
    from django_dbjobs.models import Job

    return Job.objects.count()


# Hooks for tests that run real workers; set by the tests in the worker's environment.
if os.environ.get("DBJOBS_TEST_RAW_RESULTS"):
    # Switch off the worker's cleaning of return values, so the database itself meets
    # a value it refuses (the safety net behind the validation).
    from django_dbjobs.enqueuing import validation

    validation.return_value = lambda value, reject_nul: value

if os.environ.get("DBJOBS_TEST_RAISING_RECEIVERS"):
    from django_dbjobs.signals import job_failed, job_finished, job_started

    def _raise_for_every_third(sender, job, **kwargs):
        if job.args and isinstance(job.args[0], int) and job.args[0] % 3 == 0:
            raise RuntimeError(f"receiver failed for {job.args[0]}")

    for _signal in (job_started, job_finished, job_failed):
        _signal.connect(_raise_for_every_third, weak=False)


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("even the message fails")


@job(max_attempts=1)
def raises_unprintable():
    raise Unprintable()


@job
def own_isolation():
    """The isolation state of this job's row, read from the database while it runs."""
    from django_dbjobs.models import Job

    return Job.objects.get(pk=current_job().pk).isolation


@job
def scheduled(due_time=None):
    """What a scheduled job sees of its due time: the argument and current_job().scheduled_for."""
    running = current_job()
    return {"due_time": due_time, "scheduled_for": running.scheduled_for.isoformat()}


@job
def tick():
    """A scheduled job that does nothing: the tests count the rows."""


@job
def charge(card_token, amount, note=""):
    """A job with a secret positional argument: the admin masks it by its name."""
    return {"charged": amount, "api_key": "returned-secret"}


@job
def record_when_released(path, value):
    """Record `started:<value>`, wait until the file `path` exists (the test releases it), record `value`."""
    record(f"started:{value}")
    deadline = time.monotonic() + 60
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)
    return record(value)


@job
def environment():
    """The language, timezone and captured data the job runs with."""
    from django.utils import timezone, translation

    from tests import context_hooks

    return {
        "language": translation.get_language(),
        "timezone": timezone.get_current_timezone_name(),
        "data": (current_job().context or {}).get("data"),
        "request_id": context_hooks.request_id.get(),
    }


@job
async def async_sleep(seconds, value):
    import asyncio

    await asyncio.sleep(seconds)
    return value


@job(max_attempts=1)
async def async_fails():
    raise LookupError("async failure")


@job
def chain(n):
    """Enqueue chain(n - 1) until n is 0."""
    from django_dbjobs import enqueue

    if n > 0:
        enqueue(chain, n - 1)
    return n


@job
def forever():
    """Enqueue itself again: a runaway job."""
    from django_dbjobs import enqueue

    enqueue(forever)


@job
def slow(seconds):
    time.sleep(seconds)
    return seconds


@job
async def async_announce_sleep(seconds, value):
    """Record `started:<value>`, then sleep without blocking the event loop."""
    import asyncio

    record(f"started:{value}")
    await asyncio.sleep(seconds)
    record(value)
    return value


@job
def activates_german():
    """Leave German and Tokyo time active on the thread, and enqueue a child job."""
    from django.utils import timezone, translation

    translation.activate("de")
    timezone.activate("Asia/Tokyo")
    from django_dbjobs import enqueue

    enqueue(environment)


@job(timeout=0.5, max_attempts=2)
def spins_forever():
    """Pure Python that does not return for 20 s: a timeout interrupts it at once."""
    deadline = time.monotonic() + 20  # a bound, so a broken timeout fails the test, not hangs it
    while time.monotonic() < deadline:
        pass


@job(timeout=0.5, max_attempts=1)
def swallows_exceptions():
    """`except Exception` everywhere: JobTimeout (a BaseException) still gets through."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            while time.monotonic() < deadline:
                pass
        except Exception:  # noqa: BLE001
            pass


@job
def spin_for(seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pass
    return seconds


@job(timeout=5)
def quick_with_timeout(n):
    return n


@job(timeout=0.5, max_attempts=1)
def sleeps_in_c(seconds, value):
    """Blocked in C (time.sleep) past its timeout: only ending the process stops it."""
    record(f"started:{value}")
    time.sleep(seconds)
    record(value)


@job(timeout=0.5, max_attempts=1)
async def async_sleeps_too_long():
    import asyncio

    await asyncio.sleep(30)


@job(max_attempts=1)
def violates_a_constraint():
    """A database error raised inside the job (a duplicate primary key)."""
    from django_dbjobs.models import Queue

    Queue.objects.create(name="duplicate")
    Queue.objects.create(name="duplicate")


@job(max_attempts=3, backoff=3600)
def enqueues_a_name_that_is_not_a_job():
    """Fails with django_dbjobs' own UnknownJob: its failure is the job's, not a hand-back.

    Its retry waits an hour, so one testing.run_jobs() runs it once however slow the machine.
    """
    from django_dbjobs import enqueue

    enqueue("shop.jobs.misspelled")


class HostileError(Exception):
    """An exception whose traceback cannot be replaced: user code may define anything."""

    def with_traceback(self, tb):
        raise RuntimeError("with_traceback refused")


@job(max_attempts=1)
def raises_hostile_exception():
    raise HostileError("hostile")


@job(concurrency_key="acct:{account}", concurrency_limit=2)
def keyed_span(account, n, seconds=0.05):
    """Write when it starts and ends (time.time()) to the record file, for a ledger of overlaps."""
    record(f"start {account} {n} {time.time():.6f}")
    time.sleep(seconds)
    record(f"end {account} {n} {time.time():.6f}")
    return n


@job
def unkeyed_span(n):
    record(f"start - {n} {time.time():.6f}")
    return n


@job(concurrency_key="hold:{account}", concurrency_limit=2, max_attempts=5)
def keyed_hold_first_attempt(account, n, seconds=60):
    """Record its start; its first run holds its slot for `seconds`, later ones end at once."""
    with open(os.environ["DBJOBS_TEST_RECORD"]) as lines:
        ran_before = any(line.startswith(f"start {account} {n} ") for line in lines)
    record(f"start {account} {n} {time.time():.6f}")
    if not ran_before:
        time.sleep(seconds)
    return n


@job(concurrency_key=lambda tenant, **kwargs: f"tenant-{tenant}")
def keyed_by_function(tenant, **kwargs):
    return tenant


@job(queue="rated")
def rated_start(n):
    record(f"rated - {n} {time.time():.6f}")
    return n


@job(max_attempts=3)
def runs_in_python(seconds, value):
    """Record `started:<value>`, then run Python code (short sleeps) for `seconds`."""
    record(f"started:{value}")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.01)
    record(value)
    return value


@job(max_attempts=3)
def sleeps_in_c_untimed(seconds, value):
    """Record `started:<value>`, then block in one C call (time.sleep) for `seconds`."""
    record(f"started:{value}")
    time.sleep(seconds)
    record(value)


@job(max_attempts=3, interruptible=False)
def stops_by_itself(seconds, value):
    """Not interruptible: checks current_job().cancel_requested and stops as cancelled."""
    from django_dbjobs.exceptions import JobCancelled

    record(f"started:{value}")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if current_job().cancel_requested:
            record(f"saw:{value}")
            raise JobCancelled("stopped at the request")
        time.sleep(0.01)
    return value


@job(concurrency_key="solo:{account}", concurrency_limit=1, max_attempts=5)
def keyed_python_span(account, n, seconds):
    """Record its start and end (time.time()), running Python code (short sleeps) for `seconds`."""
    record(f"start {account} {n} {time.time():.6f}")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.01)
    record(f"end {account} {n} {time.time():.6f}")
    return n


@job(queue="rated")
def rated_sleep(seconds, n):
    record(f"rated - {n} {time.time():.6f}")
    time.sleep(seconds)
    return n


@job(concurrency_key="stuck:{account}", max_attempts=3)
def keyed_sleeps_in_c(account, seconds):
    """Record `started:<account>`, then block in one C call (time.sleep) for `seconds`."""
    record(f"started:{account}")
    time.sleep(seconds)


def _record_batch(kind, batch):
    record(f"{kind}:{batch['description']}:{batch['total']}:{batch['succeeded']}:{batch['failed']}")


@job
def batch_succeeded(batch):
    """A batch's on_success callback: record it with the batch's counts."""
    _record_batch("success", batch)


@job
def batch_failed(batch):
    _record_batch("failure", batch)


@job
def batch_completed(batch):
    _record_batch("complete", batch)


@job
def noop(n):
    return None


@job
def fan_out(n, value):
    """Add `n` jobs to this job's own batch (fan-out in stages)."""
    from django_dbjobs import enqueue

    for i in range(n):
        enqueue(record, f"{value}-{i}", batch=current_job().batch_id)


@job
def fails_while_exists(path):
    if os.path.exists(path):
        raise ValueError(f"{path} exists")
    record("recovered")


@job
def pause(seconds):
    time.sleep(seconds)


@job
def loaded(names):
    """Which of the modules `names` the process running this job has imported."""
    return [name for name in names if name in sys.modules]


@job(max_attempts=3, interruptible=False)
def keeps_on_when_asked(seconds, value):
    """Not interruptible, and never looks at current_job().cancel_requested: runs `seconds` all the same."""
    record(f"started:{value}")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.01)
    record(value)


@job(max_attempts=1)
def declined(order_id):
    """Fails in _decline(), the order's id in the message: one cause, whatever the order."""
    _decline(order_id)


def _decline(order_id):
    raise ValueError(f"order {order_id} was declined")


@job(max_attempts=1)
def refund_declined(order_id):
    """Fails with declined()'s message, raised in another function: another cause."""
    raise ValueError(f"order {order_id} was declined")


@job
def opens_a_span(name):
    """Open a span of the job's own, as instrumented code (a client library) would."""
    from opentelemetry import trace

    with trace.get_tracer("tests").start_as_current_span(name):
        pass


@job
async def async_opens_a_span(name):
    """opens_a_span(), from an ``async def`` job's event loop."""
    from opentelemetry import trace

    with trace.get_tracer("tests").start_as_current_span(name):
        pass


@job(max_attempts=3)
def cancels_itself():
    from django_dbjobs.exceptions import JobCancelled

    raise JobCancelled("the job saw it was not wanted")


# Their jobs are registered wherever these are.
from tests import idempotency_jobs, long_jobs, resumable_jobs  # noqa: E402, F401
