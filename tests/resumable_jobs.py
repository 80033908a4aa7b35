"""Jobs that walk items with resumable() and hand themselves back: imported by tests/jobs.py."""

import asyncio
import os
import time

from django.contrib.auth.models import Group, User
from django.db.models import F

from django_dbjobs import ResumeLater, aresumable, current_job, job, resumable
from django_dbjobs.models import Job
from django_dbjobs.models.long_work import stopping_workers

#: The names of the Group rows the worker tests walk, and the usernames of the unit tests' users.
GROUP_PREFIX = "item-"
USER_PREFIX = "walk-"


def append(ledger: str, value) -> None:
    """Add `value` to the ledger file, a line, at once (a killed process's lines stay)."""
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{value}\n".encode())
    finally:
        os.close(fd)


@job(max_attempts=3)
def walk_groups(ledger: str, item_seconds: float, every: int):
    """Walk the GROUP_PREFIX groups by primary key, a ledger line and a short sleep each."""
    for group in resumable(Group.objects.filter(name__startswith=GROUP_PREFIX), every=every):
        append(ledger, group.name)
        time.sleep(item_seconds)
    return "walked"


@job(max_attempts=3)
def walk_range(ledger: str, count: int, item_seconds: float, every: int):
    """Walk range(count), a ledger line and a short sleep each."""
    for number in resumable(range(count), every=every):
        append(ledger, number)
        time.sleep(item_seconds)
    return "walked"


@job(max_attempts=3)
async def awalk_range(ledger: str, count: int, item_seconds: float, every: int):
    """walk_range() for an ``async def`` job, with aresumable()."""
    async for number in aresumable(range(count), every=every):
        append(ledger, f"a{number}")
        await asyncio.sleep(item_seconds)
    return "walked"


@job(max_attempts=3)
def walk_recorded(
    kind: str,
    count: int = 0,
    every: int = 100,
    seconds: float = 10.0,
    key: str = "pk",
    stop_at: int | None = None,
    fail_at: int | None = None,
    item_seconds: float = 0.0,
    lose_at: int | None = None,
):
    """Walk a list ("list") or the USER_PREFIX users ("users") into DBJOBS_TEST_RECORD.

    On its first run, after `stop_at` items it plays its worker being asked to stop; on its
    first attempt, at item `fail_at` (after recording it) it raises, and after `lose_at` items
    it plays a sweep taking it away (its pickup counted up behind its back).
    """
    me = current_job()
    first_run = me.resume is None
    stopping_workers.discard(me.worker)  # the play of the last run ends here
    items = list(range(count)) if kind == "list" else User.objects.filter(username__startswith=USER_PREFIX)
    seen = 0
    for item in resumable(items, every=every, seconds=seconds, key=key):
        value = item if kind == "list" else item.username
        append(os.environ["DBJOBS_TEST_RECORD"], value)
        seen += 1
        if first_run and seen == stop_at:
            stopping_workers.add(me.worker)
        if me.attempts == 1 and seen == fail_at:
            raise RuntimeError(f"failed at {value}")
        if me.attempts == 1 and seen == lose_at:
            Job.objects.filter(pk=me.pk).update(pickups=F("pickups") + 1)
        time.sleep(item_seconds)
    return seen


@job(max_attempts=3)
async def awalk_recorded(kind: str, count: int, every: int, stop_at: int | None = None):
    """walk_recorded() for an ``async def`` job, with aresumable()."""
    me = current_job()
    first_run = me.resume is None
    stopping_workers.discard(me.worker)
    items = list(range(count)) if kind == "list" else User.objects.filter(username__startswith=USER_PREFIX)
    seen = 0
    async for item in aresumable(items, every=every):
        value = item if kind == "list" else item.username
        append(os.environ["DBJOBS_TEST_RECORD"], value)
        seen += 1
        if first_run and seen == stop_at:
            stopping_workers.add(me.worker)
        await asyncio.sleep(0)
    return seen


#: What resumable() is given by resumable_refused(kind): each refused with a clear error.
def _refused(kind: str):
    users = User.objects.all()
    return {
        "key not unique": lambda: resumable(users, key="first_name"),
        "no such key": lambda: resumable(users, key="nope"),
        "other order": lambda: resumable(users.order_by("-username")),
        "sliced": lambda: resumable(users[:5]),
        "generator": lambda: resumable(n for n in range(3)),
        "string": lambda: resumable("abc"),
        "key for a list": lambda: resumable([1, 2], key="id"),
        "every": lambda: resumable([1], every=0),
        "seconds": lambda: resumable([1], seconds=0),
        "foreign checkpoint": lambda: (current_job().checkpoint({"page": 3}), list(resumable([1])))[1],
    }[kind]


@job(max_attempts=1)
def resumable_refused(kind: str):
    """Return the error resumable() raises for `kind` of bad input (see _refused())."""
    try:
        _refused(kind)()
    except (TypeError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return "accepted"


@job(max_attempts=3)
def hand_back_once(delay: float = 0.0, cancel: bool = False, group: str = ""):
    """Store a checkpoint, then hand itself back (ResumeLater) on its first run; return the checkpoint after.

    With `cancel`, it first asks for its own cancellation; with `group`, it creates that group first.
    """
    me = current_job()
    if me.resume is not None:
        return me.resume
    if group:
        Group.objects.create(name=group)
    me.checkpoint({"handed": "back"})
    if cancel:
        Job.objects.filter(pk=me.pk).cancel()
    raise ResumeLater(delay)


@job(max_attempts=1)
def report_then_hand_back():
    """Report progress after its checkpoint, then hand itself back (once)."""
    me = current_job()
    if me.resume is not None:
        return me.progress.done
    me.checkpoint({"done": 5})
    me.progress(6, total=10, note="after the checkpoint")
    raise ResumeLater(60)


@job(max_attempts=1)
def always_hands_back():
    raise ResumeLater()


@job(max_attempts=1)
def hands_back_with(delay):
    raise ResumeLater(delay)
