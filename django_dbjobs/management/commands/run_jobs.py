"""The run_jobs command: parse the worker's options and run a worker, or a supervisor of several."""

import argparse
import logging
import os
import signal
import sys
from contextlib import nullcontext

from django.core.management.base import BaseCommand, CommandError

from django_dbjobs import db, registry
from django_dbjobs.enqueuing import validation
from django_dbjobs.exceptions import DbJobsError
from django_dbjobs.management import logs
from django_dbjobs.management.options import add_queues_option, port_number, positive_int, queue_names
from django_dbjobs.management.worker_checks import without_unused_checks
from django_dbjobs.observability import metrics_endpoint, tracing
from django_dbjobs.operations import known_queues
from django_dbjobs.worker.lifecycle import replacement, stop_signals, supervisor
from django_dbjobs.worker.lifecycle.burst_progress import BurstProgress


class Command(BaseCommand):
    help = "Run background jobs: claim due jobs and run them until stopped (SIGTERM/SIGINT)."

    def add_arguments(self, parser):
        add_queues_option(parser, "Comma-separated queues to take jobs from (default: every queue).")
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
        parser.add_argument(
            "--processes",
            type=positive_int,
            default=1,
            help="Worker processes to run and supervise, each with --concurrency threads (default: 1).",
        )
        parser.add_argument(
            "--exit-when-stuck",
            action="store_true",
            help="After a job that cannot be interrupted, exit with status 3 for your supervisor to "
            "restart the worker, instead of replacing this process with a fresh run_jobs (the default).",
        )
        parser.add_argument(
            "--metrics-port",
            type=port_number,
            default=None,
            help="Serve the worker's Prometheus metrics on this port at /metrics (needs prometheus_client; "
            "with --processes, one endpoint for every process).",
        )
        parser.add_argument(
            "--metrics-address",
            default=metrics_endpoint.DEFAULT_ADDRESS,
            help=f"Address --metrics-port listens on (default: {metrics_endpoint.DEFAULT_ADDRESS}, "
            "every interface).",
        )
        # A child of --processes records its metrics for the supervisor to serve (metrics_endpoint.py).
        parser.add_argument("--metrics-child", action="store_true", help=argparse.SUPPRESS)
        parser.add_argument("--database", default="default", help="Database alias (default: default).")

    def check(self, *args, **kwargs):
        with without_unused_checks():  # see worker_checks.py: no URLconf, no migrate command
            return super().check(*args, **kwargs)

    def handle(self, *args, **options):
        logs.show(self.stderr._out, options["verbosity"])
        queues = options["queues"] = queue_names(options["queues"])
        try:
            for name in queues:
                validation.queue(name)
            if options["processes"] > 1:
                return self._supervise(options)
            # This app's migrations, which the worker checks as it starts, are read before the
            # worker's own code is imported: compiling 0001_initial (without a cached .pyc) takes
            # about 1.3 MiB for a moment, which the code imported after it reuses once freed,
            # where the worker's peak would otherwise be that much higher (db/migration_history.py).
            db.read_migrations_ahead()
            from django_dbjobs.worker.lifecycle.loop import Worker

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
            metrics = metrics_endpoint.for_worker(
                options["metrics_port"], options["metrics_address"], child=options["metrics_child"]
            )
            one_line = options["burst"] and self.stdout.isatty() and not supervisor.supervised()  # not N
            progress = BurstProgress(self.stdout, queues, options["database"]) if one_line else nullcontext()
            with metrics, progress:
                worker.run()
            if worker.exit_status:
                replace = not (options["exit_when_stuck"] or worker.stop_signalled)
                self._exit_after_stuck_job(worker.exit_status, replace)
        except (DbJobsError, ValueError) as exc:
            raise CommandError(str(exc)) from exc

    def execute(self, *args, **options):
        stop_signals.supervisor_pid()  # read (and hidden from job code) before anything runs
        return super().execute(*args, **options)

    def run_from_argv(self, argv):
        self._replacement = replacement.Replacement(list(argv))  # read now: replacement.py
        return super().run_from_argv(argv)

    def _exit_after_stuck_job(self, status: int, replace: bool) -> None:
        message = "The worker stopped after a job it could not interrupt; exiting with status 3."
        if not getattr(self, "_called_from_command_line", False):
            raise CommandError(message, returncode=status)
        for signum in (signal.SIGTERM, signal.SIGINT):
            # A stop now ends the process at once: a KeyboardInterrupt would make Python wait
            # for the stuck call's thread (an async job's event loop is not a daemon thread).
            signal.signal(signum, signal.SIG_DFL)
        tracing.flush()  # the spans a batching exporter holds: the process ends without atexit
        if replace and self._replacement.possible():
            self._replacement.replace()  # returns only if it failed
        self.stderr.write(message)
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        # Not sys.exit(): Python would wait for the stuck call's thread (an async job's event
        # loop is not a daemon thread) before exiting.
        os._exit(status)

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.allow_abbrev = False  # "--proc 2" must not pass for --processes (supervisor.py)
        return parser

    def _supervise(self, options) -> None:
        """Run `--processes` children, each this command with the same options but one process."""
        if supervisor.supervised():
            raise CommandError("run_jobs --processes cannot run under another run_jobs --processes.")
        if os.name != "posix":
            raise CommandError("run_jobs --processes needs POSIX signals and process groups (Linux, macOS).")
        from django.conf import settings

        if not settings.SETTINGS_MODULE:
            raise CommandError("run_jobs --processes needs a settings module (DJANGO_SETTINGS_MODULE).")
        db.require_migrated(options["database"])  # once here, not once per child and restart
        registry.autodiscover()  # the jobs' queues are known names
        known_queues.warn_unused(options["queues"], options["database"])
        arguments = ["--verbosity", str(options["verbosity"]), "--database", options["database"]]
        if options["queues"]:
            arguments += ["--queues", ",".join(options["queues"])]
        for option in ("concurrency", "max_jobs", "poll_interval", "shutdown_grace", "prefetch"):
            if options[option] is not None:
                arguments += [f"--{option.replace('_', '-')}", str(options[option])]
        arguments += ["--burst"] * options["burst"] + ["--no-scheduler"] * options["no_scheduler"]
        arguments += ["--exit-when-stuck"] * options["exit_when_stuck"]
        with metrics_endpoint.for_supervisor(options["metrics_port"], options["metrics_address"]) as metrics:
            status = supervisor.Supervisor(
                supervisor.child_command(arguments + (metrics.arguments if metrics else [])),
                options["processes"],
                options["burst"],
                env={**supervisor.child_environment(), **(metrics.environment if metrics else {})},
                on_exit=metrics.exited if metrics else None,
            ).run()
        if status:
            raise CommandError("A worker process exited with an error; see the log above.", returncode=1)
