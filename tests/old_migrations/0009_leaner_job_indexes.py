# Fewer indexes for every new job to write: the (status, worker) index becomes one over
# RUNNING jobs only, and PostgreSQL's LIKE index on the id, which nothing used, goes.
# Built and dropped without blocking writes on PostgreSQL (CONCURRENTLY); a worker of
# this release runs before or after it (INDEX_ONLY_MIGRATIONS).

import django_dbjobs.db
import django_dbjobs.db.online_index
from django.db import migrations, models
from django_dbjobs.db.online_index import AddIndexOnline, RemoveIndexOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_dbjobs", "0008_enqueuer_context"),
    ]

    operations = [
        AddIndexOnline(
            model_name="job",
            index=django_dbjobs.db.RunningJobsIndex(
                fields=["worker"],
                name="dbjobs_job_running_idx",
                where=models.Q(("status", "RUNNING")),
                lead=["status"],
            ),
        ),
        RemoveIndexOnline(model_name="job", name="dbjobs_job_worker_idx"),
        django_dbjobs.db.online_index.DropIdPatternIndex("job", "id"),
    ]
