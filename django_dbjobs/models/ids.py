"""Job ids: UUIDv7 strings, ordered by creation time and unguessable."""

import os
import threading
import time

_lock = threading.Lock()
_last_millis = 0
_sequence = 0


def new_id() -> str:
    """Return a new UUIDv7 (RFC 9562) as a 36-character string.

    Within one process ids are strictly increasing: ids made in the same millisecond
    carry a counter in the 12 ``rand_a`` bits (RFC 9562, method 1), so "oldest first"
    holds for jobs enqueued in the same millisecond too. The 62 ``rand_b`` bits stay
    random.
    """
    global _last_millis, _sequence
    with _lock:
        millis = time.time_ns() // 1_000_000
        if millis > _last_millis:
            _last_millis, _sequence = millis, int.from_bytes(os.urandom(2), "big") & 0x1FF
        else:  # same millisecond (or the clock stepped back): count on
            _sequence += 1
            if _sequence > 0xFFF:
                _last_millis, _sequence = _last_millis + 1, 0
            millis = _last_millis
        sequence = _sequence
    value = (millis & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76  # version
    value |= sequence << 64  # rand_a: the counter
    value |= 0b10 << 62  # variant
    value |= int.from_bytes(_random_bytes(), "big") & ((1 << 62) - 1)  # rand_b
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def new_ids(count: int) -> list[str]:
    """`count` ids, as `count` calls of new_id() would make them, at under half the cost.

    A batch larger than the 4,096 a millisecond's counter holds runs the ids' clock ahead
    (a millisecond per 4,096), as many new_id() calls in one millisecond do. The clock is
    read once: the batch is runs of consecutive counters, one run per millisecond, and
    each id is text put together from its run's prefix, its counter's hex digits (from a
    table) and 16 hex digits of one read of random bytes, the first made a variant digit.
    """
    global _last_millis, _sequence
    runs = []  # (millisecond, first counter, how many ids)
    with _lock:
        millis = time.time_ns() // 1_000_000
        left = count
        while left:
            if millis > _last_millis:
                _last_millis, _sequence = millis, int.from_bytes(os.urandom(2), "big") & 0x1FF
            else:
                _sequence += 1
                if _sequence > 0xFFF:
                    _last_millis, _sequence = _last_millis + 1, 0
            take = min(left, 0x1000 - _sequence)
            runs.append((_last_millis, _sequence, take))
            _sequence += take - 1
            left -= take
    randoms = os.urandom(8 * count).hex()  # rand_b: 62 bits an id, 2 of them in the variant digit
    variant, counters = _VARIANT_DIGIT, _COUNTER_DIGITS
    made = []
    at = 0
    for stamp, first, take in runs:
        text = f"{stamp & ((1 << 48) - 1):012x}"
        prefix = f"{text[:8]}-{text[8:]}-7"  # the version digit, then the counter's three
        for sequence in range(first, first + take):
            made.append(
                prefix
                + counters[sequence]
                + variant[randoms[at]]
                + randoms[at + 1 : at + 4]
                + "-"
                + randoms[at + 4 : at + 16]
            )
            at += 16
    return made


#: A random hex digit's two low bits under the variant bits (0b10): 8, 9, a or b.
_VARIANT_DIGIT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}
#: The counter (rand_a, 12 bits) as three hex digits and the dash after them.
_COUNTER_DIGITS = [f"{n:03x}-" for n in range(0x1000)]


_pool = threading.local()
_generation = 0


def _forked() -> None:
    global _generation, _last_millis, _lock
    _generation += 1  # a child must never reuse its parent's unread random bytes
    _last_millis = 0
    _lock = threading.Lock()  # another thread may have held it at the fork


os.register_at_fork(after_in_child=_forked)


def _random_bytes() -> bytes:
    """8 bytes from os.urandom, read 4 KiB at a time: one system call per 512 ids."""
    pool = _pool.__dict__
    position = pool.get("position", 4096)
    if position >= 4096 or pool.get("generation") != _generation:
        pool["bytes"], pool["generation"], position = os.urandom(4096), _generation, 0
    pool["position"] = position + 8
    return pool["bytes"][position : position + 8]
