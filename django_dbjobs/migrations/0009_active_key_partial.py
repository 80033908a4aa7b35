# The one-active-job-per-key constraint over the rows that have a key (where the database
# has partial indexes): jobs without a unique key, and finished jobs, leave the index.
# The new index is built first (without blocking writes on PostgreSQL), then the old
# constraint is dropped, so "one active job per key" holds throughout.

import django_dbjobs.db
from django.db import migrations, models
from django_dbjobs.db.online_index import AddConstraintOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_dbjobs", "0008_enqueuer_context"),
    ]

    operations = [
        AddConstraintOnline(
            model_name="job",
            constraint=django_dbjobs.db.ActiveKeyConstraint(
                fields=("name", "active_key"),
                name="dbjobs_job_active_key_uniq",
                where=models.Q(("active_key__isnull", False)),
            ),
        ),
        migrations.RemoveConstraint(
            model_name="job",
            name="dbjobs_job_one_active_per_key",
        ),
    ]
