"""The idempotency checker: each job run twice, and again after its worker died, against one run."""

from .checker import Checker
from .report import Finding, IdempotencyReport, RowChange
from .snapshots import Ignored

__all__ = ["Checker", "Finding", "IdempotencyReport", "Ignored", "RowChange"]
