"""Wake idle workers when jobs are committed.

In one process, enqueue() calls notify() on commit, which sets the event of every
worker running in this process. Workers also poll, so a lost wake-up costs at most
one poll interval; it is never needed for correctness.
"""

import threading

_subscribers: set[threading.Event] = set()
_generation = 0
_lock = threading.Lock()


def notify() -> None:
    """Wake the workers of this process (enqueue() calls it on commit)."""
    global _generation
    with _lock:
        _generation += 1
        subscribers = list(_subscribers)
    for event in subscribers:
        event.set()


def generation() -> int:
    """How many wake-ups this process has sent; tests compare it before and after."""
    return _generation


def subscribe(event: threading.Event) -> None:
    with _lock:
        _subscribers.add(event)


def unsubscribe(event: threading.Event) -> None:
    with _lock:
        _subscribers.discard(event)
