"""The index of the dependency rows still to count (dbjobs_status's stuck workflows), built
without blocking writes on PostgreSQL. Workers do not need it: they may start before it is built."""

import django_dbjobs.db.indexes
from django.db import migrations, models
from django_dbjobs.db.online_index import AddIndexOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_dbjobs", "0006_queue_notify"),
    ]

    operations = [
        AddIndexOnline(
            model_name="jobdependency",
            index=django_dbjobs.db.indexes.UncountedEdgesIndex(fields=["job", "upstream"], lead=["counted"], name="dbjobs_dep_uncounted_idx", where=models.Q(("counted", False))),
        ),
    ]
