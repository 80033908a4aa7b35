"""The index of dead letters by cause and the index of the live jobs, built without blocking writes.

The first groups the dead letters by cause (the admin's page, dbjobs_status); the second
holds the READY and RUNNING jobs by queue, state and due time, what the database gauges,
the admin overview and dbjobs_status count (db/indexes.py: ActiveJobsIndex).

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
        AddIndexOnline(
            model_name="job",
            index=django_dbjobs.db.indexes.ActiveJobsIndex(
                fields=["status", "queue", "blocked", "run_at"],
                lead=[],
                name="dbjobs_job_active_idx",
                where=models.Q(("status", "READY"), ("status", "RUNNING"), _connector="OR"),
            ),
        ),
    ]
