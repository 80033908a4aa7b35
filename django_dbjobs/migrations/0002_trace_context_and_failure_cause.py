"""The trace context of a job's enqueuer and the cause of a dead letter; the page of causes.

Two nullable columns (no table rewrite on PostgreSQL), and the admin's page of dead
letters by cause gets its place in the app index (a proxy: no table). One transaction
where the database has transactional DDL: an interrupted run leaves nothing behind. The
index of causes (0003) and the causes of the dead letters already stored (0004) follow
in migrations of their own, each safe to run again.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
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
        migrations.CreateModel(
            name="FailureGroup",
            fields=[],
            options={
                "verbose_name": "failure cause",
                "verbose_name_plural": "dead letters by cause",
                "proxy": True,
                "default_permissions": (),
                "indexes": [],
                "constraints": [],
            },
            bases=("django_dbjobs.job",),
        ),
    ]
