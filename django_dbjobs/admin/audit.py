"""One log line per admin state change: who did what, and how many rows it changed."""

from __future__ import annotations

import logging

logger = logging.getLogger("django_dbjobs")


def log_change(request, what: str, *, extra: dict | None = None, **details: object) -> None:
    """Log `what` `request`'s user did, with `details` as key=value and `extra` on the record."""
    text = " ".join(f"{key}={value}" for key, value in details.items())
    logger.info("Admin %s %s by=%s", what, text, request.user.get_username(), extra=extra)
