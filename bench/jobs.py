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
