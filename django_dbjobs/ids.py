"""Kept for migration files that name ``django_dbjobs.ids.new_id`` (copies, squashes): see models/ids.py."""

from .models.ids import new_id

__all__ = ["new_id"]
