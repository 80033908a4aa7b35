"""Job functions used by the tests; autodiscovered as the `jobs` module of the tests app."""

import os
import signal
import time

from django_dbjobs import current_job, job


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
