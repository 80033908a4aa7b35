"""The index of the jobs of each batch (the batch page, retention), built without blocking
writes on PostgreSQL. Workers do not need it: they may start before it is built."""

import django_dbjobs.db.indexes
from django.db import migrations, models
from django_dbjobs.db.online_index import AddIndexOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_dbjobs", "0004_workflows"),
    ]

    operations = [
        AddIndexOnline(
            model_name="job",
            index=django_dbjobs.db.indexes.BatchJobsIndex(fields=["batch", "status"], lead=[], name="dbjobs_job_batch_idx", plain=["batch"], where=models.Q(("batch__isnull", False))),
        ),
    ]
