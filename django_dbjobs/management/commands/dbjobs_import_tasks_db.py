"""The dbjobs_import_tasks_db command: move django-tasks-db's waiting tasks into jobs."""

from django.core.management.base import BaseCommand, CommandError
from django.db import router

from django_dbjobs import db
from django_dbjobs.exceptions import DbJobsError
from django_dbjobs.management.migrate_hint import saying_to_migrate
from django_dbjobs.management.options import add_queues_option, positive_int, queue_names
from django_dbjobs.models import Job
from django_dbjobs.operations.tasks_db_import import DEFAULT_BATCH_SIZE, SOURCE_TABLE, import_tasks_db


class Command(BaseCommand):
    help = (
        "Move the READY tasks of django-tasks-db's table into the job table. A dry run that only "
        "reports, unless --commit."
    )

    def add_arguments(self, parser):
        parser.add_argument("--commit", action="store_true", help="Move the rows (default: only report).")
        parser.add_argument(
            "--batch-size",
            type=positive_int,
            default=DEFAULT_BATCH_SIZE,
            help=f"Rows moved per transaction (default: {DEFAULT_BATCH_SIZE}).",
        )
        parser.add_argument(
            "--database",
            default=None,
            help="Database alias holding both tables (default: the one the router picks for jobs).",
        )
        parser.add_argument(
            "--table",
            default=SOURCE_TABLE,
            help=f"The django-tasks-db table to move from (default: {SOURCE_TABLE}).",
        )
        add_queues_option(parser, "Comma-separated queues whose tasks to move (default: every queue).")

    def handle(self, *args, **options):
        using = options["database"] or router.db_for_write(Job)
        try:
            db.require_migrated(using)  # before the source table is looked for
            with saying_to_migrate(using):
                report = import_tasks_db(
                    table=options["table"],
                    queues=queue_names(options["queues"]),
                    batch_size=options["batch_size"],
                    using=options["database"],
                    commit=options["commit"],
                )
        except DbJobsError as exc:
            raise CommandError(str(exc)) from exc
        for line in report.lines():
            self.stdout.write(line)
