"""The dbjobs_schedules command: list cron schedules, or run one now."""

import json

from django.core.management.base import BaseCommand, CommandError

from django_dbjobs.exceptions import DbJobsError
from django_dbjobs.management.migrate_hint import saying_to_migrate
from django_dbjobs.models import Job, Schedule
from django_dbjobs.schedules.report import schedule_rows


class Command(BaseCommand):
    help = "List cron schedules (next and last run), or run one now with --run-now NAME."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="Print the schedules as JSON.")
        parser.add_argument(
            "--run-now",
            metavar="NAME",
            help="Enqueue the schedule's job now (a manual run: its next due time stays).",
        )
        parser.add_argument("--database", default="default", help="Database alias (default: default).")

    def handle(self, *args, **options):
        with saying_to_migrate(options["database"]):
            self._handle(options)

    def _handle(self, options):
        using = options["database"]
        if options["run_now"]:
            return self._run_now(options["run_now"], using)
        rows = schedule_rows(Schedule.objects.using(using), Job.objects.using(using))
        if options["json"]:
            self.stdout.write(json.dumps(rows, indent=2))
            return
        if not rows:
            self.stdout.write("No schedules. Define them in DBJOBS_SCHEDULES or create Schedule rows.")
            return
        columns = [
            ("NAME", "name"),
            ("CRON", "cron"),
            ("TIMEZONE", "timezone"),
            ("NEXT (LOCAL)", "next_local"),
            ("NEXT (UTC)", "next_utc"),
            ("LAST DUE (UTC)", "last_utc"),
            ("LAST JOB", "last_status"),
            ("STATE", "state"),
        ]
        table = [[title for title, _ in columns]]
        for row in rows:
            table.append([str(row["display"][key]) for _, key in columns])
        widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
        for line in table:
            cells = (cell.ljust(width) for cell, width in zip(line, widths, strict=True))
            self.stdout.write("  ".join(cells).rstrip())

    def _run_now(self, name: str, using: str) -> None:
        schedule = Schedule.objects.using(using).filter(name=name).first()
        if schedule is None:
            raise CommandError(f"No schedule named {name!r}. `manage.py dbjobs_schedules` lists them.")
        try:
            job, created = schedule.run_now(using=using)
        except DbJobsError as exc:
            raise CommandError(f"Schedule {name!r} cannot run: {exc}") from exc
        if created:
            self.stdout.write(f"Enqueued job {job.pk} ({job.name}) for schedule {name!r}.")
        else:
            self.stdout.write(
                f"Not enqueued: schedule {name!r} has no_overlap and its job {job.pk} is still {job.status}."
            )
