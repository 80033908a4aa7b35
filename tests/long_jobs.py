"""Long jobs the tests run (progress, checkpoints): imported by tests/jobs.py, so workers know them."""

import asyncio
import time

from django.db import transaction

from django_dbjobs import current_job, job
from tests import jobs


@job(max_attempts=3)
def checkpoint_then_fail(fail_until: int):
    """Store the attempt in a checkpoint after reading the last one; fail until `fail_until`."""
    me = current_job()
    seen = me.resume
    me.progress(me.attempts, total=fail_until, note=f"attempt {me.attempts}")
    me.checkpoint({"attempt": me.attempts, "seen": seen})
    if me.attempts < fail_until:
        raise RuntimeError(f"attempt {me.attempts}")
    return seen


@job(max_attempts=1)
def checkpoint_value(value):
    """Store `value` as the checkpoint (the tests pass values the checkpoint refuses)."""
    return current_job().checkpoint(value)


#: Checkpoints that are not JSON data, by name (enqueue() would refuse them as arguments).
NOT_JSON = {"nan": float("nan"), "int key": {1: "x"}, "object": object()}


@job(max_attempts=1)
def checkpoint_not_json(kind: str):
    return current_job().checkpoint(NOT_JSON[kind])


@job(max_attempts=1)
def count_with_progress(seconds: float, fail: bool = False, every: float = 0.001):
    """Report progress every `every` seconds for `seconds` (1000 times a second by default);
    fail at the end when asked."""
    me = current_job()
    done, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        done += 1
        me.progress(done, total=None, note=f"item {done}")
        time.sleep(every)
    me.progress(done, total=done, note="last")
    if fail:
        raise RuntimeError(f"failed after {done} items")
    return done


@job(max_attempts=1)
async def async_count_with_progress(count: int):
    """progress() from an async def job: `count` reports, the last one kept."""
    for done in range(1, count + 1):
        current_job().progress(done, total=count, note="async")
        await asyncio.sleep(0)
    return count


@job(max_attempts=1)
def hold_own_row(seconds: float, value: str):
    """Checkpoint inside a transaction held `seconds` (its row stays locked), with progress pending."""
    me = current_job()
    with transaction.atomic():
        me.progress(1, total=3, note="checkpointed")
        me.checkpoint({"at": 1})
        me.progress(2, total=3, note="holding the row")
        jobs.record(f"locked:{value}")
        time.sleep(seconds)
    me.progress(3, total=3, note="done")
    return value


@job(max_attempts=2)
def report_then_end(fail: bool):
    """Report progress, then succeed or fail (its first attempt is retried)."""
    current_job().progress(7, note="ending")
    if fail:
        raise RuntimeError("failed after reporting")
    return 7


#: How many progress reports count_slowly makes per checkpoint, TICK seconds apart.
TICKS_PER_STEP = 5
TICK = 0.1


@job(max_attempts=1)
def count_slowly(steps: int, note: str = "item"):
    """Report progress every TICK seconds, `steps` * TICKS_PER_STEP of them, storing a checkpoint each step.

    The checkpoint writes the newest progress along with it: the admin sees it move even
    without the worker's own progress writer.
    """
    me = current_job()
    total = steps * TICKS_PER_STEP
    for step in range(steps):
        for tick in range(TICKS_PER_STEP):
            me.progress(step * TICKS_PER_STEP + tick, total=total, note=f"{note} {step + 1} of {steps}")
            time.sleep(TICK)
        last = step == steps - 1
        me.progress(
            (step + 1) * TICKS_PER_STEP,
            total=total,
            note="all done" if last else f"{note} {step + 1} of {steps}",
        )
        me.checkpoint({"step": step + 1})
    return total


@job(max_attempts=1)
def odd_note():
    """Report a note no database stores as it is (NUL, a lone surrogate), and a huge count."""
    current_job().progress(1e308, note="a\x00b\ud800c")
    current_job().progress(1.7e308, note="a\x00b\ud800c")
    return "done"
