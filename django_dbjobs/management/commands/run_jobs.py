import logging

from django.core.management.base import BaseCommand, CommandError

from django_dbjobs import validation
from django_dbjobs.exceptions import DbJobsError
from django_dbjobs.management.options import positive_int
from django_dbjobs.progress import BurstProgress
from django_dbjobs.worker import Worker


class Command(BaseCommand):
    help = "Run background jobs: claim due jobs and run them until stopped (SIGTERM/SIGINT)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--queues",
            default="",
            help="Comma-separated queues to take jobs from (default: every queue).",
        )
        parser.add_argument(
            "--concurrency",
            type=positive_int,
            default=1,
            help="Jobs run at once, each on its own thread and connection (default: 1).",
        )
        parser.add_argument(
            "--burst",
            action="store_true",
            help="Exit once no job is due and none is running.",
        )
        parser.add_argument(
            "--max-jobs",
            type=positive_int,
            default=None,
            help="Exit after claiming this many jobs and finishing them.",
        )
        parser.add_argument(
            "--poll-interval",
            type=float,
            default=None,
            help="Seconds between checks for due jobs when idle (default: DBJOBS_POLL_INTERVAL).",
        )
        parser.add_argument(
            "--shutdown-grace",
            type=float,
            default=None,
            help="Seconds to let running jobs finish after SIGTERM (default: DBJOBS_SHUTDOWN_GRACE).",
        )
        parser.add_argument(
            "--prefetch",
            type=int,
            default=None,
            help="Jobs to claim beyond free threads (default: DBJOBS_PREFETCH).",
        )
        parser.add_argument(
            "--no-scheduler",
            action="store_true",
            help="Do not fire cron schedules from this process (others still do).",
        )
        parser.add_argument("--database", default="default", help="Database alias (default: default).")

    def handle(self, *args, **options):
        self._show_logs(options["verbosity"])
        queues = [q.strip() for q in options["queues"].split(",") if q.strip()]
        try:
            for name in queues:
                validation.queue(name)
            worker = Worker(
                queues=queues,
                concurrency=options["concurrency"],
                burst=options["burst"],
                max_jobs=options["max_jobs"],
                poll_interval=options["poll_interval"],
                shutdown_grace=options["shutdown_grace"],
                prefetch=options["prefetch"],
                using=options["database"],
                scheduler=not options["no_scheduler"],
            )
            if options["burst"] and self.stdout.isatty():
                with BurstProgress(self.stdout, queues, options["database"]):
                    worker.run()
            else:
                worker.run()
        except (DbJobsError, ValueError) as exc:
            raise CommandError(str(exc)) from exc

    def _show_logs(self, verbosity: int) -> None:
        """Print the worker's log lines unless the project configured the logger."""
        logger = logging.getLogger("django_dbjobs")
        if logger.handlers:
            return
        handler = logging.StreamHandler(self.stderr._out)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel({0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG))
