"""PostgreSQL: a NOTIFY when a queue is paused or resumed, so an idle worker's wake-up claim
need not read the paused queues first (worker/claiming/paused_queues.py). Workers may start before
it is applied (workers_need_it): each LISTEN connection looks for the trigger, and trusts
what it hears only where it fires; so 0005's index build never holds them back either."""

import django_dbjobs.db.triggers
from django.db import migrations


class Migration(migrations.Migration):
    workers_need_it = False

    dependencies = [
        ("django_dbjobs", "0005_workflows_index"),
    ]

    operations = [
        django_dbjobs.db.triggers.QueueTriggers(),
    ]
