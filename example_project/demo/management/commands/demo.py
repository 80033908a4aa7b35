import time

from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from demo import jobs
from django_dbjobs import bulk_enqueue, enqueue, prepare
from django_dbjobs.models import Job, JobStatus


class Command(BaseCommand):
    help = "Enqueue the demo jobs, run run_jobs --burst until they are done, and report."

    def handle(self, *args, **options):
        Job.objects.filter(name__startswith="demo.").delete()
        with transaction.atomic():
            bulk_enqueue(prepare(jobs.resize_image, i, kwargs={"width": 320}) for i in range(1, 6))
            enqueue(jobs.send_welcome_email, "ada@example.com")
            enqueue(jobs.build_broken_report, 7)
        self.stdout.write(f"Enqueued {Job.objects.count()} jobs; running the worker.\n")

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            call_command("run_jobs", burst=True, concurrency=2, verbosity=options["verbosity"])
            upcoming = Job.objects.ready().order_by("run_at").first()
            if upcoming is None:
                break
            # --burst stops when nothing is due; wait for the next retry and go again.
            time.sleep(max(0.0, min((upcoming.run_at - timezone.now()).total_seconds(), 5)))

        self.report()
        self.stdout.write("Schedules (DBJOBS_SCHEDULES; every run_jobs also fires them):")
        call_command("dbjobs_schedules")

    def report(self):
        rows = Job.objects.order_by("enqueued_at", "id")
        counts = {status: rows.filter(status=status).count() for status in JobStatus.values}
        retried = rows.filter(attempts__gt=1).count()
        self.stdout.write("\nJob                              Status      Attempts  Result")
        for job in rows:
            result = job.return_value if job.status == JobStatus.SUCCESSFUL else job.last_error
            self.stdout.write(f"{job.name:<32} {job.status:<11} {job.attempts:>8}  {result}")
        self.stdout.write(
            f"\n{counts['SUCCESSFUL']} succeeded, {retried} retried, {counts['FAILED']} failed "
            f"(dead letters), {counts['READY'] + counts['RUNNING']} left.\n"
        )
