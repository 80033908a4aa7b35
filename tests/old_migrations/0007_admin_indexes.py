# Indexes for the admin's pages (and retention), built without blocking writes on
# PostgreSQL (CREATE INDEX CONCURRENTLY), so a big job table keeps taking jobs meanwhile.

import django_dbjobs.db
from django.db import migrations, models
from django_dbjobs.db.online_index import AddIndexOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_dbjobs", "0006_queues_dead_letters"),
    ]

    operations = [
        AddIndexOnline(
            model_name="job",
            index=django_dbjobs.db.FinishedJobsIndex(
                fields=["status", "finished_at", "id"],
                name="dbjobs_job_finished_idx",
                where=models.Q(("status", "SUCCESSFUL"), ("status", "FAILED"), _connector="OR"),
                lead=[],
            ),
        ),
        AddIndexOnline(
            model_name="job",
            index=django_dbjobs.db.FailedJobsIndex(
                fields=["queue", "finished_at", "id"],
                name="dbjobs_job_failed_queue_idx",
                where=models.Q(("status", "FAILED")),
                lead=["status"],
            ),
        ),
        AddIndexOnline(
            model_name="job",
            index=django_dbjobs.db.UniqueKeyIndex(
                fields=["unique_key"],
                name="dbjobs_job_unique_key_idx",
                where=models.Q(("unique_key__isnull", False)),
                lead=[],
            ),
        ),
    ]
