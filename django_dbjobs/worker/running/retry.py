"""RetryPolicy: how long a failed job waits before its next attempt."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from ...conf import settings


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter: base * 2 ** (attempt - 1), capped at `cap`.

    Jitter draws the delay from the upper half of that range, so jobs that failed
    together do not all come back in the same instant.
    """

    base: float
    cap: float
    jitter: bool = True

    @classmethod
    def for_job(cls, backoff: float | None) -> RetryPolicy:
        """The policy for a job registered with `backoff` (None: the settings)."""
        base = settings.RETRY_BACKOFF if backoff is None else backoff
        return cls(base=float(base), cap=float(settings.RETRY_BACKOFF_MAX))

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        raw = min(self.cap, self.base * 2 ** min(max(attempt - 1, 0), 64))
        return raw * (0.5 + rand() / 2) if self.jitter else raw
