"""Autovacuum settings of the job table on PostgreSQL (db/table_storage.py); nothing elsewhere.

Workers need nothing of it: they may run before it is applied.
"""

from django.db import migrations
from django_dbjobs.db.table_storage import SetAutovacuum


class Migration(migrations.Migration):
    workers_need_it = False

    dependencies = [
        ("django_dbjobs", "0004_failure_causes_of_old_dead_letters"),
    ]

    operations = [
        SetAutovacuum(
            model_name="job",
            parameters={
                "autovacuum_vacuum_scale_factor": "0.01",
                "autovacuum_vacuum_insert_scale_factor": "0.01",
                "autovacuum_analyze_scale_factor": "0.02",
                "autovacuum_vacuum_cost_limit": "2000",
            },
        ),
    ]
