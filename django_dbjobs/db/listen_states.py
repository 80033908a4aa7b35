"""ListenStates: the states of a worker's LISTEN connection and every move between them (no I/O).

The diagram is in docs/worker.rst ("The LISTEN connection"). db/listen.py does the I/O
and tells this module what happened; a move the diagram has no arrow for raises
IllegalMove, so a new path through the connection's life is either drawn there or fails.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable

#: Seconds before the first try at opening a lost connection again; each failure doubles it.
FIRST_PAUSE = 0.5
LONGEST_PAUSE = 30.0


class State(enum.Enum):
    #: Not opened yet, or closed by the worker (it stops).
    CLOSED = "closed"
    #: Open and read for notifications; claims run on the worker's own connection (its server
    #: session may not be its own: a pooler, DBJOBS_PREPARED_STATEMENTS off...).
    LISTENING = "listening"
    #: Open, its server session its own: the worker's claims run here too (sorts off).
    CLAIMING = "claiming"
    #: Lost, or could not be opened: opened again once the pause is over.
    PAUSED = "paused"


OPEN = frozenset({State.LISTENING, State.CLAIMING})


class IllegalMove(RuntimeError):
    """A move the LISTEN connection's diagram has no arrow for."""


class ListenStates:
    """Where one LISTEN connection is in its life, and the pause before it is opened again."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.state = State.CLOSED
        #: How many times it was opened: tells one LISTEN session from the next.
        self.sessions = 0
        self.pause = FIRST_PAUSE  # the next pause, should it be lost now
        self._retry_at = 0.0

    @property
    def listening(self) -> bool:
        return self.state in OPEN

    @property
    def claims_here(self) -> bool:
        """Whether the worker's claims run on this connection now."""
        return self.state is State.CLAIMING

    def retry_in(self) -> float:
        """Seconds until it may be opened (0: now; CLOSED is opened at once)."""
        if self.state is State.PAUSED:
            return max(self._retry_at - self.clock(), 0.0)
        return 0.0

    def may_open(self) -> bool:
        """Whether connect() tries now: closed, or paused and the pause is over."""
        return self.state is State.CLOSED or (self.state is State.PAUSED and self.retry_in() == 0)

    def opened(self, own_session: bool) -> None:
        """LISTEN succeeded: CLAIMING if its server session is its own, else LISTENING."""
        self._expect("open", may_open=True)
        self.state = State.CLAIMING if own_session else State.LISTENING
        self.sessions += 1
        self.pause = FIRST_PAUSE

    def open_failed(self) -> float:
        """connect() failed: PAUSED; return the pause."""
        self._expect("fail to open", may_open=True)
        return self._paused()

    def lost(self) -> float:
        """The open connection broke (a read, a poll): PAUSED; return the pause."""
        self._expect("be lost", State.LISTENING, State.CLAIMING)
        return self._paused()

    def claim_broke(self) -> float:
        """A claim on it found it broken or left busy: PAUSED (the claim goes on on the
        worker's own connection); return the pause."""
        self._expect("break under a claim", State.CLAIMING)
        return self._paused()

    def closed(self) -> None:
        """The worker closed it (it stops): CLOSED, from any state."""
        self.state = State.CLOSED

    def _paused(self) -> float:
        pause = self.pause
        self.state = State.PAUSED
        self._retry_at = self.clock() + pause
        self.pause = min(pause * 2, LONGEST_PAUSE)
        return pause

    def _expect(self, move: str, *states: State, may_open: bool = False) -> None:
        if (may_open and self.may_open()) or self.state in states:
            return
        raise IllegalMove(f"A LISTEN connection cannot {move} while {self.state.value}.")
