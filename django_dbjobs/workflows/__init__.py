"""Workflows: batches of jobs with callbacks once all are finished (``batch()``), and jobs
that wait for others (``enqueue(..., after=[...])`` or ``with after(...)``; enqueue()'s
side is enqueuing/workflow_options.py).

The bookkeeping at each final outcome lives with the outcome writes, in
models/settling.py: it must run in their transaction.
"""

from .batches import batch
from .dependencies import after

__all__ = ["after", "batch"]
