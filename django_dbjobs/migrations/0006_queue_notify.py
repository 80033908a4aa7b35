"""PostgreSQL: a NOTIFY when a queue is paused or resumed, so an idle worker's wake-up claim
need not read the paused queues first (worker/paused_queues.py)."""

import django_dbjobs.db.triggers
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("django_dbjobs", "0005_workflows_index"),
    ]

    operations = [
        django_dbjobs.db.triggers.QueueTriggers(),
    ]
