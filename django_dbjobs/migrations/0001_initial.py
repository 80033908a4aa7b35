"""The initial migration: every table, index and constraint, and PostgreSQL's NOTIFY triggers.

It stands for the migrations before 0.1.0: the nine of the development releases
(0001_initial to 0009_leaner_job_indexes, kept as tests/old_migrations), which an
earlier squash made one 0001_initial, and that one's six successors (0002_flow_control
to 0007_dependency_uncounted_index; the seven kept as tests/seven_migrations). It makes
what they made, directly: the same columns, indexes and constraints in the same order,
the final indexes only (none made to be dropped), the same triggers. A database that
applied them all has it marked applied and changes nothing; a fresh one runs it, in one
transaction where DDL is transactional. One that applied only some (stopped at 0003,
say, or at the nine) is refused by check dbjobs.E030 (db/migration_history.py): only a
version that shipped the rest can apply them.

Named 0001_initial like the first of each chain, so `replaces` lists the fourteen
others: a migration that replaces itself is refused by Django 6.1 ("Cyclical squash
replacement") and dropped from the graph by Django 5.2, leaving the app with no
migration at all. Django counts this one applied when the fourteen are; a database with
an old 0001_initial only counts, for check dbjobs.E030, as one that applied some.

The indexes are built plainly, not CONCURRENTLY as the old migrations built most: this
migration only runs on a database without the tables, with no jobs to keep taking
meanwhile, and inside its transaction.
"""

import datetime

import django.db.models.deletion
import django.db.models.functions.datetime
import django_dbjobs.db.indexes
import django_dbjobs.db.online_index
import django_dbjobs.db.triggers
import django_dbjobs.models.ids
import django_dbjobs.models.schedule
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    replaces = [
        # The nine of the development releases, after their 0001_initial.
        ("django_dbjobs", "0002_unique_keys"),
        ("django_dbjobs", "0003_notify_trigger"),
        ("django_dbjobs", "0004_crash_accounting"),
        ("django_dbjobs", "0005_schedules"),
        ("django_dbjobs", "0006_queues_dead_letters"),
        ("django_dbjobs", "0007_admin_indexes"),
        ("django_dbjobs", "0008_enqueuer_context"),
        ("django_dbjobs", "0009_leaner_job_indexes"),
        # The seven that followed, after their 0001_initial (which replaced the nine).
        ("django_dbjobs", "0002_flow_control"),
        ("django_dbjobs", "0003_flow_control_indexes"),
        ("django_dbjobs", "0004_workflows"),
        ("django_dbjobs", "0005_workflows_index"),
        ("django_dbjobs", "0006_queue_notify"),
        ("django_dbjobs", "0007_dependency_uncounted_index"),
    ]

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="WorkerProcess",
            fields=[
                ("id", models.CharField(max_length=64, primary_key=True, serialize=False, verbose_name="id")),
                ("hostname", models.CharField(max_length=255, verbose_name="hostname")),
                ("pid", models.PositiveIntegerField(verbose_name="pid")),
                ("queues", models.JSONField(blank=True, default=list, verbose_name="queues")),
                ("concurrency", models.PositiveSmallIntegerField(verbose_name="concurrency")),
                (
                    "started_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(), verbose_name="started at"
                    ),
                ),
                (
                    "heartbeat_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(), verbose_name="last heartbeat"
                    ),
                ),
            ],
            options={
                "verbose_name": "worker",
                "verbose_name_plural": "workers",
                "ordering": ["started_at"],
            },
        ),
        migrations.CreateModel(
            name="Batch",
            fields=[
                (
                    "id",
                    models.CharField(
                        default=django_dbjobs.models.ids.new_id,
                        editable=False,
                        max_length=36,
                        primary_key=True,
                        serialize=False,
                        verbose_name="id",
                    ),
                ),
                (
                    "description",
                    models.CharField(blank=True, default="", max_length=255, verbose_name="description"),
                ),
                ("total", models.PositiveIntegerField(default=0, verbose_name="jobs")),
                ("succeeded", models.PositiveIntegerField(default=0, verbose_name="succeeded")),
                (
                    "failed",
                    models.PositiveIntegerField(
                        default=0,
                        help_text="Dead-lettered or cancelled jobs of the batch.",
                        verbose_name="failed",
                    ),
                ),
                (
                    "on_success",
                    models.CharField(
                        blank=True, db_index=True, max_length=36, null=True, verbose_name="on success"
                    ),
                ),
                (
                    "on_failure",
                    models.CharField(
                        blank=True, db_index=True, max_length=36, null=True, verbose_name="on failure"
                    ),
                ),
                (
                    "on_complete",
                    models.CharField(
                        blank=True, db_index=True, max_length=36, null=True, verbose_name="on complete"
                    ),
                ),
                (
                    "created_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(), verbose_name="created at"
                    ),
                ),
                ("finished_at", models.DateTimeField(blank=True, null=True, verbose_name="finished at")),
            ],
            options={
                "verbose_name": "batch",
                "verbose_name_plural": "batches",
                "ordering": ["-created_at", "id"],
                "indexes": [models.Index(fields=["finished_at", "id"], name="dbjobs_batch_finished_idx")],
            },
        ),
        migrations.CreateModel(
            name="Job",
            # Columns in the order the old migrations added them.
            fields=[
                (
                    "id",
                    models.CharField(
                        default=django_dbjobs.models.ids.new_id,
                        editable=False,
                        max_length=36,
                        primary_key=True,
                        serialize=False,
                        verbose_name="id",
                    ),
                ),
                (
                    "name",
                    models.CharField(
                        help_text="Registered name of the job.", max_length=255, verbose_name="job"
                    ),
                ),
                ("args", models.JSONField(blank=True, default=list, verbose_name="positional arguments")),
                ("kwargs", models.JSONField(blank=True, default=dict, verbose_name="keyword arguments")),
                ("queue", models.CharField(default="default", max_length=100, verbose_name="queue")),
                ("priority", models.SmallIntegerField(default=0, verbose_name="priority")),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("READY", "Ready"),
                            ("RUNNING", "Running"),
                            ("SUCCESSFUL", "Successful"),
                            ("FAILED", "Failed"),
                        ],
                        default="READY",
                        max_length=10,
                        verbose_name="status",
                    ),
                ),
                (
                    "run_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(), verbose_name="run at"
                    ),
                ),
                ("attempts", models.PositiveIntegerField(default=0, verbose_name="attempts")),
                ("max_attempts", models.PositiveIntegerField(default=3, verbose_name="max attempts")),
                (
                    "worker",
                    models.CharField(
                        blank=True,
                        help_text="The worker process that holds (or last held) the job.",
                        max_length=64,
                        null=True,
                        verbose_name="worker",
                    ),
                ),
                (
                    "worker_ids",
                    models.JSONField(blank=True, default=list, verbose_name="worker of each attempt"),
                ),
                (
                    "enqueued_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(), verbose_name="enqueued at"
                    ),
                ),
                ("started_at", models.DateTimeField(blank=True, null=True, verbose_name="first started at")),
                (
                    "last_attempted_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="last attempted at"),
                ),
                ("finished_at", models.DateTimeField(blank=True, null=True, verbose_name="finished at")),
                ("return_value", models.JSONField(blank=True, null=True, verbose_name="return value")),
                ("errors", models.JSONField(blank=True, default=list, verbose_name="errors")),
                ("last_error", models.TextField(blank=True, default="", verbose_name="last error")),
                (
                    "active_key",
                    models.CharField(
                        blank=True,
                        editable=False,
                        max_length=200,
                        null=True,
                        verbose_name="active unique key",
                    ),
                ),
                (
                    "unique_key",
                    models.CharField(
                        blank=True,
                        help_text="At most one ready or running job per job name and key.",
                        max_length=200,
                        null=True,
                        verbose_name="unique key",
                    ),
                ),
                (
                    "isolation",
                    models.CharField(
                        blank=True,
                        choices=[
                            ("", "No"),
                            ("WAITING", "Waiting to run alone"),
                            ("STARTED", "Running alone"),
                        ],
                        db_default="",
                        default="",
                        editable=False,
                        help_text="Held by a worker that died: runs alone until it finishes, so a crash is pinned on it.",
                        max_length=8,
                        verbose_name="isolation",
                    ),
                ),
                (
                    "pickups",
                    models.PositiveIntegerField(
                        db_default=0, default=0, editable=False, verbose_name="pickups"
                    ),
                ),
                (
                    "scheduled_for",
                    models.DateTimeField(
                        blank=True,
                        editable=False,
                        help_text="The due time of the schedule that enqueued this job; empty for other jobs.",
                        null=True,
                        verbose_name="scheduled for",
                    ),
                ),
                (
                    "context",
                    models.JSONField(
                        blank=True,
                        default=None,
                        editable=False,
                        help_text="Language, timezone and DBJOBS_CONTEXT_CAPTURE's data of the code that enqueued the job; restored while it runs.",
                        null=True,
                        verbose_name="enqueuer's context",
                    ),
                ),
                (
                    "blocked",
                    models.CharField(
                        blank=True,
                        choices=[
                            ("", "No"),
                            ("CONCURRENCY", "Waiting for a concurrency slot"),
                            ("RATE", "In a rate-limited queue: claimed within its rate"),
                            ("DONE", "Finished: holds no concurrency slot"),
                            ("AFTER", "Waiting for other jobs to finish"),
                        ],
                        db_default="",
                        default="",
                        editable=False,
                        help_text="Why a ready job is not claimed yet.",
                        max_length=12,
                        verbose_name="blocked",
                    ),
                ),
                (
                    "cancel_requested_at",
                    models.DateTimeField(
                        blank=True,
                        editable=False,
                        help_text="Set when a running job is asked to stop; its worker interrupts it.",
                        null=True,
                        verbose_name="cancel requested at",
                    ),
                ),
                (
                    "concurrency_key",
                    models.CharField(
                        blank=True,
                        editable=False,
                        help_text="At most concurrency limit jobs with this key run at once.",
                        max_length=200,
                        null=True,
                        verbose_name="concurrency key",
                    ),
                ),
                (
                    "concurrency_limit",
                    models.PositiveSmallIntegerField(
                        blank=True, editable=False, null=True, verbose_name="concurrency limit"
                    ),
                ),
                (
                    "has_dependents",
                    models.BooleanField(
                        db_default=False,
                        default=False,
                        editable=False,
                        help_text="Other jobs wait for this one.",
                        verbose_name="has dependents",
                    ),
                ),
                (
                    "waiting_for",
                    models.PositiveIntegerField(
                        blank=True,
                        editable=False,
                        help_text="How many of the jobs this one waits for have not finished yet.",
                        null=True,
                        verbose_name="waiting for",
                    ),
                ),
                (
                    "batch",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_index=False,
                        editable=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="jobs",
                        to="django_dbjobs.batch",
                        verbose_name="batch",
                    ),
                ),
            ],
            options={
                "verbose_name": "job",
                "verbose_name_plural": "jobs",
                "ordering": ["-priority", "run_at", "id"],
                # Indexes and constraints in the order the old migrations made them, so
                # MySQL's SHOW CREATE TABLE and SQLite's table SQL read the same.
                "indexes": [
                    django_dbjobs.db.indexes.FinishedJobsIndex(
                        fields=["status", "finished_at", "id"],
                        lead=[],
                        name="dbjobs_job_finished_idx",
                        where=models.Q(("status", "SUCCESSFUL"), ("status", "FAILED"), _connector="OR"),
                    ),
                    django_dbjobs.db.indexes.FailedJobsIndex(
                        fields=["queue", "finished_at", "id"],
                        lead=["status"],
                        name="dbjobs_job_failed_queue_idx",
                        where=models.Q(("status", "FAILED")),
                    ),
                    django_dbjobs.db.indexes.UniqueKeyIndex(
                        fields=["unique_key"],
                        lead=[],
                        name="dbjobs_job_unique_key_idx",
                        where=models.Q(("unique_key__isnull", False)),
                    ),
                    django_dbjobs.db.indexes.RunningJobsIndex(
                        fields=["worker"],
                        lead=["status"],
                        name="dbjobs_job_running_idx",
                        where=models.Q(("status", "RUNNING")),
                    ),
                    django_dbjobs.db.indexes.ReadyJobsIndex(
                        fields=["-priority", "run_at", "id"],
                        lead=["status", "blocked"],
                        name="dbjobs_job_claimable_idx",
                        where=models.Q(("blocked", ""), ("status", "READY")),
                    ),
                    django_dbjobs.db.indexes.RatedJobsIndex(
                        fields=["queue", "-priority", "run_at", "id"],
                        lead=["blocked"],
                        name="dbjobs_job_rated_idx",
                        where=models.Q(("blocked", "RATE"), ("status", "READY")),
                    ),
                    django_dbjobs.db.indexes.KeyedJobsIndex(
                        fields=["status", "blocked", "concurrency_key", "-priority", "run_at", "id"],
                        lead=[],
                        name="dbjobs_job_keyed_idx",
                        plain=["blocked", "concurrency_key", "-priority", "run_at", "id"],
                        where=models.Q(("concurrency_key__isnull", False)),
                    ),
                    django_dbjobs.db.indexes.BatchJobsIndex(
                        fields=["batch", "status"],
                        lead=[],
                        name="dbjobs_job_batch_idx",
                        plain=["batch"],
                        where=models.Q(("batch__isnull", False)),
                    ),
                ],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("priority__gte", -100), ("priority__lte", 100)),
                        name="dbjobs_job_priority_range",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("status__in", ["READY", "RUNNING", "SUCCESSFUL", "FAILED"])),
                        name="dbjobs_job_status_valid",
                    ),
                    models.UniqueConstraint(
                        fields=("name", "active_key"), name="dbjobs_job_one_active_per_key"
                    ),
                ],
            },
        ),
        migrations.CreateModel(
            name="Schedule",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=100, unique=True, verbose_name="name")),
                (
                    "cron",
                    models.CharField(
                        help_text="5 fields (minute hour day month weekday), 6 with seconds first, or @hourly, @daily...",
                        max_length=120,
                        verbose_name="cron expression",
                    ),
                ),
                (
                    "timezone",
                    models.CharField(
                        default=django_dbjobs.models.schedule.default_timezone,
                        help_text="IANA name, such as Europe/Paris.",
                        max_length=64,
                        verbose_name="timezone",
                    ),
                ),
                (
                    "job",
                    models.CharField(
                        help_text="Registered name of the job to enqueue.", max_length=255, verbose_name="job"
                    ),
                ),
                ("args", models.JSONField(blank=True, default=list, verbose_name="positional arguments")),
                ("kwargs", models.JSONField(blank=True, default=dict, verbose_name="keyword arguments")),
                (
                    "queue",
                    models.CharField(
                        blank=True,
                        help_text="Empty: the job's own queue.",
                        max_length=100,
                        null=True,
                        verbose_name="queue",
                    ),
                ),
                (
                    "priority",
                    models.SmallIntegerField(
                        blank=True,
                        help_text="Empty: the job's own priority.",
                        null=True,
                        verbose_name="priority",
                    ),
                ),
                (
                    "max_attempts",
                    models.PositiveIntegerField(
                        blank=True,
                        help_text="Empty: the job's own default.",
                        null=True,
                        verbose_name="max attempts",
                    ),
                ),
                ("enabled", models.BooleanField(default=True, verbose_name="enabled")),
                (
                    "missed_runs",
                    models.CharField(
                        choices=[
                            ("latest", "Run the latest, if younger than the catch-up window"),
                            ("skip", "Skip them"),
                            ("all", "Run each (the latest 100 at most)"),
                        ],
                        default="latest",
                        max_length=10,
                        verbose_name="missed runs",
                    ),
                ),
                (
                    "catch_up_window",
                    models.PositiveIntegerField(
                        default=600,
                        help_text="With 'latest': a missed run older than this is skipped.",
                        verbose_name="catch-up window (seconds)",
                    ),
                ),
                (
                    "no_overlap",
                    models.BooleanField(
                        default=False,
                        help_text="Skip a due time while this schedule's previous job is still waiting or running.",
                        verbose_name="no overlap",
                    ),
                ),
                (
                    "due_time_argument",
                    models.CharField(
                        blank=True,
                        help_text="Pass the due time (ISO 8601, UTC) to the job as this keyword argument.",
                        max_length=100,
                        verbose_name="due time argument",
                    ),
                ),
                (
                    "defined_in",
                    models.CharField(
                        choices=[("settings", "DBJOBS_SCHEDULES setting"), ("database", "Database")],
                        default="database",
                        editable=False,
                        max_length=10,
                        verbose_name="defined in",
                    ),
                ),
                ("settings_enabled", models.BooleanField(editable=False, null=True)),
                (
                    "removed_at",
                    models.DateTimeField(
                        blank=True,
                        editable=False,
                        help_text="Left DBJOBS_SCHEDULES: kept with its history, never fired.",
                        null=True,
                        verbose_name="removed from settings at",
                    ),
                ),
                (
                    "next_due_at",
                    models.DateTimeField(
                        blank=True, db_index=True, editable=False, null=True, verbose_name="next due at"
                    ),
                ),
                (
                    "last_due_at",
                    models.DateTimeField(
                        blank=True, editable=False, null=True, verbose_name="last due time fired"
                    ),
                ),
                (
                    "last_job_id",
                    models.CharField(
                        blank=True, editable=False, max_length=36, null=True, verbose_name="last job"
                    ),
                ),
                (
                    "last_fired_at",
                    models.DateTimeField(blank=True, editable=False, null=True, verbose_name="last fired at"),
                ),
                (
                    "last_error",
                    models.TextField(blank=True, default="", editable=False, verbose_name="last error"),
                ),
                (
                    "last_manual_job_id",
                    models.CharField(
                        blank=True,
                        editable=False,
                        max_length=36,
                        null=True,
                        verbose_name="last manual run's job",
                    ),
                ),
                (
                    "last_manual_at",
                    models.DateTimeField(
                        blank=True, editable=False, null=True, verbose_name="last manual run at"
                    ),
                ),
                (
                    "created_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        editable=False,
                        verbose_name="created at",
                    ),
                ),
                ("updated_at", models.DateTimeField(auto_now=True, verbose_name="updated at")),
            ],
            options={
                "verbose_name": "schedule",
                "verbose_name_plural": "schedules",
                "ordering": ["name"],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("priority__gte", -100), ("priority__lte", 100)),
                        name="dbjobs_schedule_priority_range",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("missed_runs__in", ["latest", "skip", "all"])),
                        name="dbjobs_schedule_missed_runs_valid",
                    ),
                ],
            },
        ),
        migrations.CreateModel(
            name="ScheduleTick",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("due_at", models.DateTimeField(verbose_name="due at")),
                (
                    "job_id",
                    models.CharField(
                        blank=True,
                        help_text="Empty: skipped, the previous run was active.",
                        max_length=36,
                        null=True,
                        verbose_name="job",
                    ),
                ),
                (
                    "fired_at",
                    models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(), verbose_name="fired at"
                    ),
                ),
                (
                    "fired_by",
                    models.CharField(blank=True, default="", max_length=64, verbose_name="fired by worker"),
                ),
                (
                    "schedule",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="ticks",
                        to="django_dbjobs.schedule",
                    ),
                ),
            ],
            options={
                "verbose_name": "schedule tick",
                "verbose_name_plural": "schedule ticks",
                "ordering": ["-due_at"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("schedule", "due_at"), name="dbjobs_tick_one_per_due_time"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="Queue",
            fields=[
                (
                    "name",
                    models.CharField(max_length=100, primary_key=True, serialize=False, verbose_name="name"),
                ),
                (
                    "paused_at",
                    models.DateTimeField(
                        blank=True,
                        help_text="Empty: workers claim from this queue.",
                        null=True,
                        verbose_name="paused at",
                    ),
                ),
                (
                    "paused_by",
                    models.CharField(blank=True, default="", max_length=150, verbose_name="paused by"),
                ),
            ],
            options={
                "verbose_name": "queue",
                "verbose_name_plural": "queues",
                "ordering": ["name"],
            },
        ),
        migrations.CreateModel(
            name="FailedJob",
            fields=[],
            options={
                "verbose_name": "dead letter",
                "verbose_name_plural": "dead letters",
                "proxy": True,
                "indexes": [],
                "constraints": [],
            },
            bases=("django_dbjobs.job",),
        ),
        migrations.CreateModel(
            name="Overview",
            fields=[],
            options={
                "verbose_name": "overview",
                "verbose_name_plural": "overview",
                "proxy": True,
                "default_permissions": (),
                "indexes": [],
                "constraints": [],
            },
            bases=("django_dbjobs.job",),
        ),
        migrations.CreateModel(
            name="ConcurrencyKey",
            fields=[
                (
                    "key",
                    models.CharField(
                        max_length=200, primary_key=True, serialize=False, verbose_name="concurrency key"
                    ),
                ),
            ],
            options={
                "verbose_name": "concurrency key",
                "verbose_name_plural": "concurrency keys",
            },
        ),
        migrations.CreateModel(
            name="RateSlot",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("queue", models.CharField(max_length=100, verbose_name="queue")),
                ("number", models.PositiveSmallIntegerField(verbose_name="slot")),
                (
                    "used_at",
                    models.DateTimeField(
                        default=datetime.datetime(2000, 1, 1, 0, 0, tzinfo=datetime.timezone.utc),
                        verbose_name="last used at",
                    ),
                ),
            ],
            options={
                "verbose_name": "rate slot",
                "verbose_name_plural": "rate slots",
                "constraints": [
                    models.UniqueConstraint(fields=("queue", "number"), name="dbjobs_rateslot_one_per_number")
                ],
            },
        ),
        migrations.CreateModel(
            name="JobDependency",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("upstream", models.CharField(db_index=True, max_length=36, verbose_name="waits for")),
                ("run_on_failure", models.BooleanField(default=False, verbose_name="runs if it fails")),
                ("counted", models.BooleanField(default=False, verbose_name="counted")),
                (
                    "job",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="dependencies",
                        to="django_dbjobs.job",
                        verbose_name="job",
                    ),
                ),
            ],
            options={
                "verbose_name": "job dependency",
                "verbose_name_plural": "job dependencies",
                "indexes": [
                    django_dbjobs.db.indexes.UncountedEdgesIndex(
                        fields=["job", "upstream"],
                        lead=["counted"],
                        name="dbjobs_dep_uncounted_idx",
                        where=models.Q(("counted", False)),
                    )
                ],
                "constraints": [
                    models.UniqueConstraint(fields=("job", "upstream"), name="dbjobs_dependency_once")
                ],
            },
        ),
        # PostgreSQL: Django adds a varchar_pattern_ops index beside a CharField primary
        # key, for LIKE; nothing here asks that, and 0009 dropped it. Never built here.
        django_dbjobs.db.online_index.DropIdPatternIndex(
            model_name="job",
            field="id",
        ),
        django_dbjobs.db.triggers.NotifyTriggers(),
        django_dbjobs.db.triggers.QueueTriggers(),
    ]
