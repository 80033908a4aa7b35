"""The trace context of a job's enqueuer and the cause of a dead letter, with the index of causes.

Two nullable columns (instant on PostgreSQL and MariaDB: no table rewrite) and the index
that groups dead letters by cause, built without blocking writes on PostgreSQL
(CREATE INDEX CONCURRENTLY), so a big job table keeps taking jobs meanwhile. The dead
letters already stored get their cause, a batch per transaction; the admin's page of
dead letters by cause gets its place in the app index (a proxy: no table).
"""

import django_dbjobs.db.indexes
from django.db import migrations, models, transaction
from django_dbjobs.db.online_index import AddIndexOnline
from django_dbjobs.observability.fingerprints import fingerprint

#: Dead letters fingerprinted per transaction.
BATCH = 1000


def fingerprint_dead_letters(apps, schema_editor):
    """Store the cause of every dead letter stored before causes were, from its last error record."""
    using = schema_editor.connection.alias
    jobs = apps.get_model("django_dbjobs", "Job")._base_manager.using(using)
    todo = jobs.filter(status="FAILED", error_fingerprint__isnull=True).order_by("pk")
    after = ""
    while True:
        rows = list(todo.filter(pk__gt=after).values_list("pk", "errors", "last_error")[:BATCH])
        if not rows:
            return
        causes: dict[str, list[str]] = {}
        for pk, errors, last_error in rows:
            last = errors[-1] if errors and isinstance(errors[-1], dict) else {"summary": last_error}
            causes.setdefault(fingerprint(last), []).append(pk)
        with transaction.atomic(using=using):
            for cause, pks in sorted(causes.items()):
                todo.filter(pk__in=pks).update(error_fingerprint=cause)
        after = rows[-1][0]


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
        migrations.RunPython(fingerprint_dead_letters, migrations.RunPython.noop, elidable=True),
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
