import time

from django_dbjobs import job


@job
def noop():
    return None


@job
def sleep_10ms():
    time.sleep(0.01)


@job
def stamp():
    """Return the host time at which the job started (for wake-up latency)."""
    return time.time()
