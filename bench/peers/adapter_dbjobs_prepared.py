"""django-dbjobs with prepared statements allowed (dbjobs_prepared_settings.py): the same
adapter as adapter_dbjobs, for a project that connects to PostgreSQL without a pooler."""

import os

os.environ["DJANGO_SETTINGS_MODULE"] = "dbjobs_prepared_settings"

from adapter_dbjobs import bulk, enqueue_now, install, pending, reset, single, worker_commands  # noqa: E402

__all__ = ["bulk", "enqueue_now", "install", "pending", "reset", "single", "worker_commands"]
