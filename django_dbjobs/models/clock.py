"""database_clock(): the time on the database server, which every due time is compared with."""

from __future__ import annotations

import datetime

from django.db import connections
from django.utils import timezone

from .. import db
from .job import Job


def database_clock(using: str = "default") -> datetime.datetime:
    """The database clock as an aware datetime (UTC)."""
    value = db.as_datetime(db.database_now(using), Job._meta.get_field("enqueued_at"), connections[using])
    if timezone.is_naive(value):  # USE_TZ = False
        value = timezone.make_aware(value, datetime.timezone.utc)
    return value.astimezone(datetime.timezone.utc)
