"""Progress: how far a running job says it is, as stored with it (``Job.progress_state``).

A job reports with ``current_job().progress(done, total=None, note="")``: kept in the
worker's memory, written by the worker at most once a second (worker/running/progress_writer.py)
and with the job's checkpoints and outcome, never by the call itself. The stored record is
a small JSON object; Progress reads it for the admin, ``dbjobs_status`` and code.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass
from typing import Any

from .json_values import text

#: Longest note kept with a progress report; a longer one is cut.
MAX_NOTE = 200


@dataclass(frozen=True, slots=True)
class Progress:
    """One progress report: `done` of `total` (None: unknown), a note, and the pace so far.

    `rate` is per second since the first report of the attempt (None until two reports
    tell it); `at` and `since` are when this report, and the first of its attempt, were made.
    """

    done: float
    total: float | None = None
    note: str = ""
    rate: float | None = None
    at: datetime.datetime | None = None
    since: datetime.datetime | None = None
    #: `done` at the first report of the attempt: what the rate counts from.
    since_done: float = 0

    @property
    def fraction(self) -> float | None:
        """`done` / `total`, from 0 to 1; None when the total is unknown (or 0 with nothing to do: 1)."""
        if self.total is None:
            return None
        if self.total <= 0:
            return 1.0
        return max(0.0, min(1.0, self.done / self.total))

    @property
    def percent(self) -> int | None:
        fraction = self.fraction
        return None if fraction is None else int(fraction * 100)

    @property
    def eta(self) -> float | None:
        """Seconds left at the rate so far; None without a total or a rate."""
        if self.total is None or not self.rate or self.rate <= 0:
            return None
        return max(self.total - self.done, 0) / self.rate

    def as_record(self) -> dict[str, Any]:
        """The JSON object stored in ``Job.progress_state``."""
        return {
            "done": self.done,
            "total": self.total,
            "note": self.note,
            "rate": self.rate,
            "at": _iso(self.at),
            "since": _iso(self.since),
            "since_done": self.since_done,
        }

    @classmethod
    def from_record(cls, record: Any) -> Progress | None:
        """The Progress a stored record says; None for no record (or one this version cannot read)."""
        if not isinstance(record, dict) or not _number(record.get("done")):
            return None
        total = record.get("total")
        rate = record.get("rate")
        return cls(
            done=record["done"],
            total=total if _number(total) else None,
            note=str(record.get("note") or ""),
            rate=rate if _number(rate) else None,
            at=_parse(record.get("at")),
            since=_parse(record.get("since")),
            since_done=record.get("since_done") if _number(record.get("since_done")) else 0,
        )


def report(previous: Progress | None, done: Any, total: Any, note: Any) -> Progress:
    """The Progress a job's call ``progress(done, total, note)`` makes, after `previous` (this attempt's).

    Raises TypeError or ValueError, in the job, for a value that is not a count.
    """
    done = _count(done, "done")
    total = None if total is None else _count(total, "total")
    if not isinstance(note, str):
        raise TypeError(f"progress() takes note as a string, not {type(note).__name__}.")
    # Stored with every outcome: a character no database stores (NUL, a lone surrogate)
    # would make the outcome itself unstorable, so such characters are replaced.
    note = text(str(note)[:MAX_NOTE], "the progress note", reject_nul=True, clean=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    if previous is None:
        return Progress(done, total, note, None, now, now, done)
    since = previous.since or now
    elapsed = (now - since).total_seconds()
    rate = (done - previous.since_done) / elapsed if elapsed > 0 and done >= previous.since_done else None
    if rate is not None and not math.isfinite(rate):  # JSON has no Infinity
        rate = None
    return Progress(done, total, note, rate, now, since, previous.since_done)


def _count(value: Any, name: str) -> float:
    if not _number(value):
        raise TypeError(f"progress() takes {name} as a number, not {type(value).__name__}.")
    if value < 0:
        raise ValueError(f"progress() takes {name} as a number of 0 or more, not {value!r}.")
    return value


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _iso(when: datetime.datetime | None) -> str | None:
    return None if when is None else when.isoformat()


def _parse(text: Any) -> datetime.datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
