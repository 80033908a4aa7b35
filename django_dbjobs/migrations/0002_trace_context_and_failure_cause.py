"""The trace context of a job's enqueuer and the cause of a dead letter, with the index of causes.

Two nullable columns (instant on PostgreSQL and MariaDB: no table rewrite) and the index
that groups dead letters by cause, built without blocking writes on PostgreSQL
(CREATE INDEX CONCURRENTLY), so a big job table keeps taking jobs meanwhile.
"""

import django_dbjobs.db.indexes
from django.db import migrations, models
from django_dbjobs.db.online_index import AddIndexOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_dbjobs", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="error_fingerprint",
            field=models.CharField(
                blank=True,
                editable=False,
                help_text=(
                    "Groups dead letters of one cause: the exception's class, its message with numbers "
                    "and ids masked, and the innermost frame of the job's own code."
                ),
                max_length=16,
                null=True,
                verbose_name="failure cause",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="trace_context",
            field=models.JSONField(
                blank=True,
                default=None,
                editable=False,
                help_text=(
                    "The trace context (W3C traceparent) of the code that enqueued the job, when "
                    "tracing is on; its run continues that trace."
                ),
                null=True,
                verbose_name="trace context",
            ),
        ),
        AddIndexOnline(
            model_name="job",
            index=django_dbjobs.db.indexes.FailedJobsIndex(
                fields=["error_fingerprint", "finished_at", "id"],
                lead=["status"],
                name="dbjobs_job_failed_cause_idx",
                where=models.Q(("status", "FAILED")),
            ),
        ),
    ]
