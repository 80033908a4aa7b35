"""Enqueuing: from ``enqueue()`` to a committed row, and the wake-up workers get on commit.

The public functions are re-exported here and at the package root
(``from django_dbjobs import enqueue``).
"""

from .api import aenqueue, enqueue, prepare
from .bulk import bulk_enqueue, enqueue_many
from .job_function import JobFunction, job

__all__ = ["JobFunction", "aenqueue", "bulk_enqueue", "enqueue", "enqueue_many", "job", "prepare"]
