"""Long jobs the tests run (progress, checkpoints): imported by tests/jobs.py, so workers know them."""

from django_dbjobs import current_job, job


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
