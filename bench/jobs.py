import time

from django_dbjobs import current_job, job


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


#: Iterations of cpu_5ms's loop: about 5 ms of pure Python on the 2-core benchmark machine.
CPU_LOOPS = 60_000


@job
def cpu_5ms():
    """About 5 ms of pure-Python work, holding the interpreter lock throughout (CPU-bound)."""
    total = 0
    for i in range(CPU_LOOPS):
        total += i * i
    return total % 1000


@job(concurrency_key="bench:{key}", concurrency_limit=2)
def keyed_noop(key):
    return None


@job
def batch_done(batch):
    return batch["total"]


@job
def count_for(seconds: float, report: bool):
    """Count for `seconds`, every millisecond; with `report`, report progress at each (bench/progress.py)."""
    me, done, end = current_job(), 0, time.monotonic() + seconds
    while time.monotonic() < end:
        done += 1
        if report:
            me.progress(done, note=f"item {done}")
        time.sleep(0.001)
    return done
