"""The prune_jobs command: delete old finished jobs in batches."""

import time

from django.core.management.base import BaseCommand, CommandError
from django.db import router

from django_dbjobs.management.migrate_hint import saying_to_migrate
from django_dbjobs.management.options import (
    add_database_option,
    add_queues_option,
    checked_queue_names,
    duration,
)
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.observability import missing_causes
from django_dbjobs.operations import batch_retention, retention


class Command(BaseCommand):
    help = (
        "Delete finished jobs older than DBJOBS_KEEP_SUCCEEDED / DBJOBS_KEEP_FAILED (or --older-than), "
        "in batches; never a ready or running job."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--older-than",
            type=duration,
            metavar="AGE",
            help="Delete finished jobs older than this (seconds, or 90s, 30m, 12h, 7d, 2w) instead of "
            "the DBJOBS_KEEP_* settings.",
        )
        parser.add_argument(
            "--status",
            choices=["successful", "failed", "all"],
            default="all",
            help="Which finished jobs to delete (default: all).",
        )
        add_queues_option(parser, "Comma-separated queues whose jobs to delete (default: every queue).")
        parser.add_argument(
            "--dry-run", action="store_true", help="Count what would be deleted; delete nothing."
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=retention.BATCH_SIZE,
            help=f"Rows per DELETE, each in its own transaction (default: {retention.BATCH_SIZE}).",
        )
        add_database_option(parser)

    def handle(self, *args, **options):
        queues = checked_queue_names(options["queues"])
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1.")
        statuses = [JobStatus.SUCCESSFUL, JobStatus.FAILED]
        if options["status"] != "all":
            statuses = [JobStatus(options["status"].upper())]
        using = options["database"] or router.db_for_write(Job)
        with saying_to_migrate(using):
            for status in statuses:
                self._prune(status, queues or None, using, options)
            if options["status"] == "all" and not queues and not options["dry_run"]:
                kept = (retention.kept_for(JobStatus.SUCCESSFUL), retention.kept_for(JobStatus.FAILED))
                batches = batch_retention.delete_old_batches(*kept, using=using, chunks=10**9)
                if batches:
                    self.stdout.write(f"batches: deleted {batches} finished batches, with their jobs.")
            self._fill_in_causes(using, options["dry_run"])

    def _fill_in_causes(self, using, dry_run):
        """Give the dead letters stored without a cause (by workers on older code) theirs."""
        if dry_run:
            count = missing_causes.without_cause(using).count()
            if count:
                self.stdout.write(f"failed: would give {count} dead letters stored without a cause theirs.")
            return
        filled = count = missing_causes.fill_in(using)
        while count:  # until a pass finds none (another process may be filling some in too)
            count = missing_causes.fill_in(using)
            filled += count
        if filled:
            self.stdout.write(f"failed: gave {filled} dead letters stored without a cause theirs.")

    def _prune(self, status, queues, using, options):
        """Delete (or count, with --dry-run) the old finished jobs of one status."""
        label = status.label.lower()
        older_than = options["older_than"]
        kept_forever = retention.kept_for(status) is None
        if kept_forever and (older_than is None or options["status"] == "all"):
            # An age given for every status does not override "keep forever": name the status.
            self.stdout.write(
                f"{label}: kept forever (DBJOBS_{retention.KEPT_BY[status]} is None); skipped"
                + (f" (--status {label} deletes them)." if older_than is not None else ".")
            )
            return
        if older_than is None:
            older_than = retention.kept_for(status)
        count = retention.old_jobs(status, older_than, queues, using).count()
        age = f"older than {_age(older_than)}"
        if options["dry_run"] or not count:
            verb = "would delete" if options["dry_run"] else "deleted"
            self.stdout.write(f"{label}: {verb} {count} jobs {age}.")
            return
        started = time.monotonic()
        bar = _Progress(self.stdout, label, count) if self.stdout.isatty() else None
        deleted = retention.prune(
            status,
            older_than,
            queues,
            using,
            options["batch_size"],
            bar.update if bar else lambda n: None,
        )
        if bar:
            bar.close()
        self.stdout.write(f"{label}: deleted {deleted} jobs {age} in {time.monotonic() - started:.1f}s.")


class _Progress:
    """One line redrawn in place on a terminal: done/total, a bar, the rate."""

    def __init__(self, out, label: str, total: int):
        self.out, self.label, self.total = out, label, max(total, 1)
        self.started = time.monotonic()

    def update(self, done: int) -> None:
        share = min(done / self.total, 1.0)
        rate = done / max(time.monotonic() - self.started, 1e-6)
        bar = "#" * int(share * 30)
        self.out.write(
            f"\r{self.label}: {done}/{self.total} [{bar:<30}] {share:4.0%} {rate:,.0f}/s", ending=""
        )
        self.out.flush()

    def close(self) -> None:
        self.out.write("")


def _age(seconds: float) -> str:
    for unit, size in (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"
