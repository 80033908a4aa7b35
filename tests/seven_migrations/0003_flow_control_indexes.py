"""The claim index over jobs no flow control holds back, and the indexes of keyed jobs and
of rate-limited queues.

Built without blocking enqueues and claims on PostgreSQL (CONCURRENTLY, so not in a
transaction); the old claim index is dropped once the new one is there. Workers of
this release wait for it (workers_need_it): on MySQL and SQLite their claim names the
new index.
"""

import django_dbjobs.db.indexes
from django.db import migrations, models
from django_dbjobs.db.online_index import AddIndexOnline, RemoveIndexOnline


class Migration(migrations.Migration):
    atomic = False
    workers_need_it = True

    dependencies = [
        ("django_dbjobs", "0002_flow_control"),
    ]

    operations = [
        AddIndexOnline(
            model_name='job',
            index=django_dbjobs.db.indexes.ReadyJobsIndex(fields=['-priority', 'run_at', 'id'], lead=['status', 'blocked'], name='dbjobs_job_claimable_idx', where=models.Q(('blocked', ''), ('status', 'READY'))),
        ),
        AddIndexOnline(
            model_name='job',
            index=django_dbjobs.db.indexes.RatedJobsIndex(fields=['queue', '-priority', 'run_at', 'id'], lead=['blocked'], name='dbjobs_job_rated_idx', where=models.Q(('blocked', 'RATE'), ('status', 'READY'))),
        ),
        AddIndexOnline(
            model_name='job',
            index=django_dbjobs.db.indexes.KeyedJobsIndex(fields=['status', 'blocked', 'concurrency_key', '-priority', 'run_at', 'id'], lead=[], name='dbjobs_job_keyed_idx', plain=['blocked', 'concurrency_key', '-priority', 'run_at', 'id'], where=models.Q(('concurrency_key__isnull', False))),
        ),
        RemoveIndexOnline(model_name="job", name="dbjobs_job_claim_idx"),
    ]
