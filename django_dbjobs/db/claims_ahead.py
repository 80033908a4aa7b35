"""PostgreSQL: the worker's claim (claims.py) sent ahead of its loop, as sent_ahead.py says."""

from __future__ import annotations

from ..conf import settings
from . import sent_ahead
from .claims import claim_sql, in_claim_order, without_flush
from .rows_read import jobs_from_rows


def ready_claim(model, using: str, build, shape: tuple, values: dict, worker: str, limit: int, unsorted):
    """The claim claim_jobs() would run on `unsorted` (the worker's LISTEN connection, whose
    session plans without sorts), ready to send (sent_ahead.Ready); None where it must run
    through claim_jobs()."""
    if shape[-1] or unsorted.vendor != "postgresql":  # a filtered QuerySet's: never prepared
        return None
    sql, params = claim_sql(model, using, build, shape, values, worker, limit)
    if settings.ASYNC_CLAIM_COMMIT and unsorted.get_autocommit():
        sql = without_flush(sql)
    return sent_ahead.ready(unsorted, sql, params)


def claimed(model, using: str, sent: sent_ahead.Sent) -> list | None:
    """The jobs a claim sent ahead took, in claim order; None if it did not run (claim as usual)."""
    rows = sent.finish()
    if rows is None:
        return None
    return in_claim_order(jobs_from_rows(model, using, *rows))
