"""The index of dead letters by cause, built without blocking writes.

PostgreSQL builds it with ``CREATE INDEX CONCURRENTLY`` (outside a transaction: a big
job table keeps taking jobs meanwhile); an interrupted build is dropped and made again
on the next ``migrate`` (db/online_index.py).
"""

import django_dbjobs.db.indexes
from django.db import migrations, models
from django_dbjobs.db.online_index import AddIndexOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_dbjobs", "0002_trace_context_and_failure_cause"),
    ]

    operations = [
        AddIndexOnline(
            model_name="job",
            index=django_dbjobs.db.indexes.FailedJobsIndex(
                fields=["error_fingerprint", "finished_at", "id"],
                lead=["status"],
                name="dbjobs_job_failed_cause_idx",
                where=models.Q(("status", "FAILED")),
            ),
        ),
    ]
