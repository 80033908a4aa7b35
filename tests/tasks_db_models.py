"""django-tasks-db 0.13's table, for the import tests: the columns its migrations leave.

Unmanaged, so the test database is made without it; the tests create and drop it.
"""

import datetime
import uuid

from django.db import models
from django.db.models import Q

TABLE = "django_tasks_database_dbtaskresult"
# django-tasks-db's "no run_after" (tests run with USE_TZ = True).
NO_RUN_AFTER = datetime.datetime(9999, 1, 1, tzinfo=datetime.timezone.utc)


class TaskResultColumns(models.Model):
    """Every column of DBTaskResult but its id, as django_tasks_db/models.py declares them."""

    status = models.CharField(
        choices=[(s, s.title()) for s in ("READY", "RUNNING", "FAILED", "SUCCESSFUL")],
        default="READY",
        max_length=10,
    )
    enqueued_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True)
    finished_at = models.DateTimeField(null=True)
    args_kwargs = models.JSONField()
    priority = models.IntegerField(default=0)
    task_path = models.TextField()
    worker_ids = models.JSONField(default=list)
    queue_name = models.CharField(default="default", max_length=32)
    backend_name = models.CharField(max_length=32)
    run_after = models.DateTimeField()
    return_value = models.JSONField(default=None, null=True)
    exception_class_path = models.TextField()
    traceback = models.TextField()

    class Meta:
        abstract = True


class DBTaskResult(TaskResultColumns):
    """The table as django-tasks-db's migrations make it with this Django (MariaDB: a uuid column)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)

    class Meta:
        app_label = "tests"
        db_table = TABLE
        managed = False
        indexes = [models.Index(fields=["queue_name"]), models.Index(fields=["backend_name"])]
        constraints = [
            models.CheckConstraint(condition=Q(priority__range=(-100, 100)), name="priority_range")
        ]


class HexIdDBTaskResult(TaskResultColumns):
    """The same table with ids as 32 hex characters: SQLite, MySQL, and MariaDB before Django 5.0."""

    id = models.CharField(primary_key=True, max_length=32)

    class Meta:
        app_label = "tests"
        db_table = TABLE
        managed = False
