"""The dbjobs_status command: each queue's jobs, lag and workers, with exit codes for monitoring."""

import json

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, InterfaceError, router

from django_dbjobs.management.migrate_hint import saying_to_migrate
from django_dbjobs.management.options import (
    add_database_option,
    add_queues_option,
    checked_queue_names,
    positive_int,
    seconds,
)
from django_dbjobs.models import Job
from django_dbjobs.operations.long_transactions import DEFAULT_LONG_TRANSACTION
from django_dbjobs.operations.status import judge, read_status
from django_dbjobs.operations.status_table import table


class Command(BaseCommand):
    # A probe: fast, and it must report an unreachable database as such (exit 2), which
    # Django's system checks would turn into a traceback before handle() runs.
    requires_system_checks = []
    help = (
        "Show each queue's ready, running and failed jobs, its lag and the live workers; exit 1 when a "
        "--fail-if-* threshold is crossed, 2 when the database cannot be read."
    )

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="Print the status as JSON.")
        add_queues_option(parser, "Comma-separated queues to report and judge (default: every queue).")
        parser.add_argument(
            "--fail-if-lag",
            type=seconds,
            metavar="SECONDS",
            help="Exit 1 if a queue's oldest due job has waited longer than this (paused queues excepted).",
        )
        parser.add_argument(
            "--fail-if-failed",
            type=positive_int,
            metavar="N",
            help="Exit 1 if there are N or more failed jobs (dead letters) in the queues reported.",
        )
        parser.add_argument(
            "--fail-if-no-workers",
            action="store_true",
            help="Exit 1 if no worker (serving --queues, when given) has sent a heartbeat within "
            "DBJOBS_HEARTBEAT_TIMEOUT.",
        )
        parser.add_argument(
            "--fail-if-long-transaction",
            type=seconds,
            metavar="SECONDS",
            help="Exit 1 if the transaction (or prepared transaction) with the oldest horizon, holding "
            "back the cleanup of dead rows, has been open longer than this, or if the database user "
            "may not read who holds it (PostgreSQL, MariaDB/MySQL; never on SQLite).",
        )
        parser.add_argument(
            "--long-transaction-after",
            type=seconds,
            default=DEFAULT_LONG_TRANSACTION,
            metavar="SECONDS",
            help="Name the oldest transaction once it has been open longer than this "
            f"(default {DEFAULT_LONG_TRANSACTION:g}).",
        )
        add_database_option(parser)

    def handle(self, *args, **options):
        queues = checked_queue_names(options["queues"])
        using = options["database"] or router.db_for_write(Job)
        # Shown from the lower of the two: a failing verdict's culprit is in the report too.
        after = options["long_transaction_after"]
        if options["fail_if_long_transaction"] is not None:
            after = min(after, options["fail_if_long_transaction"])
        try:
            with saying_to_migrate(using):
                status = read_status(
                    queues or None,
                    using=using,
                    with_causes=True,
                    long_transaction_after=after,
                    with_running=True,
                )
        except (DatabaseError, InterfaceError) as exc:
            raise CommandError(
                f"Cannot read the job tables of database {using!r}: {exc}", returncode=2
            ) from exc
        problems = judge(
            status,
            lag=options["fail_if_lag"],
            failed=options["fail_if_failed"],
            need_workers=options["fail_if_no_workers"],
            long_transaction=options["fail_if_long_transaction"],
        )
        if options["json"]:
            self.stdout.write(json.dumps(status.as_json(), indent=2))
        else:
            for line in table(status):
                self.stdout.write(line)
        if problems:  # said once, on stderr: the table does not repeat them
            raise CommandError("; ".join(problems), returncode=1)
