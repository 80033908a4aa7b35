"""django-dbjobs with prepared statements turned off (dbjobs_unprepared_settings.py): the
same adapter as adapter_dbjobs, for a project behind a transaction-mode pooler."""

import os

os.environ["DJANGO_SETTINGS_MODULE"] = "dbjobs_unprepared_settings"

from adapter_dbjobs import bulk, enqueue_now, install, pending, reset, single, worker_commands  # noqa: E402

__all__ = ["bulk", "enqueue_now", "install", "pending", "reset", "single", "worker_commands"]
