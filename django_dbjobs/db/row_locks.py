"""Row locks: whether the database has SKIP LOCKED, and a queryset locking its rows with it."""

from __future__ import annotations

from django.db import connections


def lock_or_skip(queryset):
    """`queryset` locking its rows, skipping those another transaction holds (SQLite: no-op).

    PostgreSQL takes FOR NO KEY UPDATE, which a foreign key check on the row (FOR KEY
    SHARE, as inserting a child row takes) does not block.
    """
    features = connections[queryset.db].features
    return queryset.select_for_update(
        skip_locked=features.has_select_for_update_skip_locked,
        no_key=features.has_select_for_no_key_update,
    )


def can_skip_locked(using: str = "default") -> bool:
    """True where row locks with SKIP LOCKED exist (PostgreSQL, MySQL 8, MariaDB 10.6+)."""
    return connections[using].features.has_select_for_update_skip_locked
