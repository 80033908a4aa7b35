"""Long jobs' helpers for their own code: resumable() walks items from the job's last checkpoint."""

from .walk import aresumable, resumable

__all__ = ["aresumable", "resumable"]
