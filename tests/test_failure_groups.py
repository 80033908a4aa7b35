"""observability/failure_groups.py and its admin page: dead letters grouped, retried and deleted by cause."""

import datetime
import importlib
import inspect
import io
import json
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from django_dbjobs import enqueue
from django_dbjobs.admin import failure_groups as failure_groups_admin
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.models.failed_job import FailedJobQuerySet
from django_dbjobs.observability import failure_groups
from django_dbjobs.observability.fingerprints import fingerprint
from django_dbjobs.testing import run_jobs
from tests import jobs

from .admin_helpers import failed_job, staff, visible

pytestmark = pytest.mark.django_db(transaction=True)
#: The migration that gives the dead letters stored before causes were theirs.
BACKFILL = importlib.import_module("django_dbjobs.migrations.0004_failure_causes_of_old_dead_letters")

PAGE = "/admin/django_dbjobs/failuregroup/"


def failures():
    """Three dead letters of declined() (two queues), one of refund_declined(); return the two causes."""
    for order, queue in ((1, "default"), (2, "default"), (3, "payments")):
        enqueue(jobs.declined, order, queue=queue)
    enqueue(jobs.refund_declined, 4)
    run_jobs(["default", "payments"])
    declined = Job.objects.filter(name="tests.jobs.declined").values_list("error_fingerprint", flat=True)
    refund = Job.objects.get(name="tests.jobs.refund_declined").error_fingerprint
    assert len(set(declined)) == 1 and refund not in declined
    return declined[0], refund


def test_causes_count_each_cause_with_when_where_and_a_sample():
    declined, refund = failures()
    newest = Job.objects.filter(name="tests.jobs.declined").order_by("-pk").first()
    Job.objects.filter(error_fingerprint=refund).update(
        finished_at=timezone.now() - datetime.timedelta(hours=1)
    )
    found = failure_groups.causes()
    assert [cause.fingerprint for cause in found] == [declined, refund], "newest last seen first"
    cause = found[0]
    assert cause.count == 3 and cause.first_seen <= cause.last_seen
    assert cause.names == {"tests.jobs.declined": 3}
    assert cause.queues == {"default": 2, "payments": 1}
    assert cause.sample_id == newest.pk and cause.summary == newest.errors[-1]["summary"]
    assert "_decline" in cause.traceback and cause.exception_class_path == "builtins.ValueError"
    assert [c.fingerprint for c in failure_groups.causes("count", limit=1)] == [declined]


def test_the_sample_of_a_cause_is_its_newest_failure_not_its_newest_job():
    declined, _refund = failures()
    by_pk = list(Job.objects.filter(error_fingerprint=declined).order_by("pk"))
    hour = datetime.timedelta(hours=1)
    Job.objects.filter(pk=by_pk[-1].pk).update(
        finished_at=timezone.now() - hour
    )  # enqueued last, failed first
    Job.objects.filter(pk=by_pk[0].pk).update(finished_at=timezone.now() + hour)
    sample = by_pk[0].pk
    assert [c.sample_id for c in failure_groups.causes() if c.fingerprint == declined] == [sample]
    assert failure_groups.cause(declined).sample_id == sample
    # Of two failures finished at one instant, the last enqueued.
    Job.objects.filter(pk__in=[by_pk[0].pk, by_pk[1].pk]).update(finished_at=timezone.now() + 2 * hour)
    assert failure_groups.cause(declined).sample_id == by_pk[1].pk


def test_the_names_and_queues_of_a_cause_are_counted_among_its_newest_dead_letters(monkeypatch):
    declined, _refund = failures()
    monkeypatch.setattr(failure_groups, "NAMES_READ", 2)
    (cause,) = [cause for cause in failure_groups.causes() if cause.fingerprint == declined]
    assert cause.count == 3 and cause.names_read == 2
    newest = Job.objects.filter(error_fingerprint=declined).order_by("-finished_at", "-pk")[:2]
    assert sum(cause.queues.values()) == 2 and set(cause.queues) == {job.queue for job in newest}
    assert "of the last 2" in visible(staff(superuser=True).get(PAGE).content.decode())


def test_dead_letters_stored_before_causes_are_a_group_of_their_own():
    failed_job()
    (cause,) = failure_groups.causes()
    assert cause.fingerprint is None and cause.count == 1 and cause.summary == "RuntimeError: boom"
    assert failure_groups.retry_cause(None).retried == 1


def test_retrying_a_cause_requeues_only_its_dead_letters_still_of_that_cause():
    declined, refund = failures()
    moved = Job.objects.filter(error_fingerprint=declined).first()
    Job.objects.filter(pk=moved.pk).update(error_fingerprint="0" * 16)  # failed again since, of another cause
    report = failure_groups.retry_cause(declined)
    assert report.retried == 2
    assert Job.objects.filter(status=JobStatus.READY, error_fingerprint__isnull=True).count() == 2
    assert Job.objects.get(pk=moved.pk).status == JobStatus.FAILED
    assert Job.objects.get(error_fingerprint=refund).status == JobStatus.FAILED


@pytest.mark.parametrize("change", ["retry", "delete"])
@pytest.mark.parametrize("since", ["failed again of another cause", "retried"])
def test_a_row_leaving_its_cause_between_listing_and_writing_is_left_alone(monkeypatch, change, since):
    declined, _refund = failures()
    moved = Job.objects.filter(error_fingerprint=declined).order_by("pk").first().pk
    listed = FailedJobQuerySet._batches

    def then_moved(queryset, batch_size):
        for pks in listed(queryset, batch_size):
            assert moved in pks, "listed with its cause"
            if since == "retried":  # the status fence
                Job.objects.filter(pk=moved).update(status=JobStatus.READY, error_fingerprint=None)
            else:
                Job.objects.filter(pk=moved).update(error_fingerprint="0" * 16)  # the cause fence
            yield pks

    monkeypatch.setattr(FailedJobQuerySet, "_batches", then_moved)
    if change == "retry":
        report = failure_groups.retry_cause(declined)
        assert (report.retried, report.skipped) == (2, 1)
    else:
        assert failure_groups.delete_cause(declined) == (2, 1)
    after = Job.objects.get(pk=moved)
    assert (after.status, after.error_fingerprint) == (
        (JobStatus.READY, None) if since == "retried" else (JobStatus.FAILED, "0" * 16)
    )


def test_deleting_a_cause_deletes_only_its_dead_letters():
    declined, refund = failures()
    assert failure_groups.delete_cause(declined) == (3, 0)
    assert list(Job.objects.values_list("error_fingerprint", flat=True)) == [refund]


def test_the_migration_fingerprints_the_dead_letters_stored_before(monkeypatch):
    failures()
    enqueue(jobs.add, 1, 1)
    stored = dict(Job.objects.filter(status=JobStatus.FAILED).values_list("pk", "error_fingerprint"))
    Job.objects.update(error_fingerprint=None)
    legacy = failed_job(errors=[])  # no error record at all: its last_error stands for one
    monkeypatch.setattr(BACKFILL, "BATCH", 2)  # several batches
    BACKFILL.fingerprint_dead_letters(apps, connection.schema_editor())
    now = dict(Job.objects.filter(status=JobStatus.FAILED).values_list("pk", "error_fingerprint"))
    assert now == {**stored, legacy.pk: fingerprint({"summary": "RuntimeError: boom"})}
    assert Job.objects.get(status=JobStatus.READY).error_fingerprint is None


def test_the_migration_stopped_part_way_finishes_when_run_again(monkeypatch):
    failures()
    stored = dict(Job.objects.filter(status=JobStatus.FAILED).values_list("pk", "error_fingerprint"))
    Job.objects.update(error_fingerprint=None)
    monkeypatch.setattr(BACKFILL, "BATCH", 1)
    calls = []

    def dies_on_the_third(record):
        calls.append(record)
        if len(calls) == 3:
            raise KeyboardInterrupt  # a deploy's timeout, mid-way
        return fingerprint(record)

    monkeypatch.setattr(BACKFILL, "fingerprint", dies_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        BACKFILL.fingerprint_dead_letters(apps, connection.schema_editor())
    assert (
        Job.objects.filter(status=JobStatus.FAILED, error_fingerprint__isnull=False).count() == 2
    )  # committed
    monkeypatch.setattr(BACKFILL, "fingerprint", fingerprint)
    BACKFILL.fingerprint_dead_letters(apps, connection.schema_editor())
    assert dict(Job.objects.filter(status=JobStatus.FAILED).values_list("pk", "error_fingerprint")) == stored
    read = []
    monkeypatch.setattr(BACKFILL, "fingerprint", lambda record: read.append(record) or fingerprint(record))
    BACKFILL.fingerprint_dead_letters(apps, connection.schema_editor())
    assert read == []  # nothing left: a third run reads no row


def test_dbjobs_status_reports_the_most_frequent_causes():
    declined, refund = failures()
    out = io.StringIO()
    call_command("dbjobs_status", "--json", stdout=out)
    causes = json.loads(out.getvalue())["failure_causes"]
    assert [(c["fingerprint"], c["count"]) for c in causes] == [(declined, 3), (refund, 1)]
    assert causes[0]["sample"]["summary"].startswith("ValueError: order ") and causes[0]["last_seen"]
    out = io.StringIO()
    call_command("dbjobs_status", stdout=out)
    assert f"     3  {declined}  ValueError: order" in out.getvalue()


def test_dbjobs_status_without_dead_letters_reports_no_cause():
    out = io.StringIO()
    call_command("dbjobs_status", "--json", stdout=out)
    assert json.loads(out.getvalue())["failure_causes"] == []


# The admin page


def test_the_page_lists_each_cause_with_its_jobs_queues_and_links():
    declined, refund = failures()
    page = staff(superuser=True).get(PAGE)
    assert page.status_code == 200
    shown = visible(page.content.decode())
    assert "Dead letters by cause" in shown and declined in shown and refund in shown
    assert "tests.jobs.declined (3)" in shown and "default (2)" in shown and "payments (1)" in shown
    assert "Sample traceback" in shown and "_decline" in shown
    html = page.content.decode()
    assert f"/admin/django_dbjobs/failedjob/?cause={declined}" in html
    listed = staff("other", superuser=True).get(f"/admin/django_dbjobs/failedjob/?cause={declined}")
    rows = visible(listed.content.decode().split('id="result_list"')[1].split("</table>")[0])
    assert rows.count("ValueError: order") == 3 and "refund_declined" not in rows


def test_viewers_see_the_page_without_the_buttons_and_cannot_change():
    declined, _refund = failures()
    assert staff("nobody").get(PAGE).status_code == 403
    viewer = staff("viewer", "django_dbjobs.view_failedjob")
    page = viewer.get(PAGE).content.decode()
    assert declined in page and "Retry all" not in page and "Delete all" not in page
    assert viewer.post(f"{PAGE}retry/?cause={declined}", {"post": "yes"}).status_code == 403
    assert viewer.post(f"{PAGE}delete/?cause={declined}", {"post": "yes"}).status_code == 403
    assert Job.objects.filter(status=JobStatus.FAILED).count() == 4


def test_retry_a_cause_confirms_then_requeues_and_logs(caplog):
    declined, _refund = failures()
    client = staff("retrier", "django_dbjobs.view_failedjob", "django_dbjobs.change_failedjob")
    assert "Retry all" in client.get(PAGE).content.decode()
    confirm = client.get(f"{PAGE}retry/?cause={declined}").content.decode()
    assert "3 dead letters: ValueError: order" in visible(confirm) and 'value="Yes, retry them"' in confirm
    assert Job.objects.filter(status=JobStatus.FAILED).count() == 4, "a GET changes nothing"
    with caplog.at_level("INFO", logger="django_dbjobs"):
        done = client.post(f"{PAGE}retry/?cause={declined}", {"post": "yes"}, follow=True)
    assert client.messages(done) == ["3 jobs queued again."]
    assert Job.objects.filter(status=JobStatus.READY).count() == 3
    assert f"retried dead letters of a cause cause={declined} retried=3 skipped=0 by=retrier" in caplog.text
    again = client.post(f"{PAGE}retry/?cause={declined}", {"post": "yes"}, follow=True)  # a double submit
    assert client.messages(again) == ["0 jobs queued again."]


def test_delete_a_cause_needs_the_delete_permission_and_deletes_it():
    declined, refund = failures()
    assert (
        staff("retrier", "django_dbjobs.view_failedjob", "django_dbjobs.change_failedjob")
        .post(f"{PAGE}delete/?cause={declined}", {"post": "yes"})
        .status_code
        == 403
    )
    client = staff("deleter", "django_dbjobs.view_failedjob", "django_dbjobs.delete_failedjob")
    done = client.post(f"{PAGE}delete/?cause={declined}", {"post": "yes"}, follow=True)
    assert client.messages(done) == ["3 dead letters deleted."]
    assert list(Job.objects.values_list("error_fingerprint", flat=True)) == [refund]


class _JobsElsewhere:
    """Routes the jobs' writes to the alias ``jobs``; the test wraps the calls that reach it."""

    def db_for_write(self, model, **hints):
        return "jobs" if model._meta.app_label == "django_dbjobs" else None


def test_the_page_reads_and_changes_the_causes_on_the_router_s_database(monkeypatch):
    declined, refund = failures()
    asked = []

    def on_default(real):
        def call(*args, **kwargs):
            bound = inspect.signature(real).bind(*args, **kwargs)
            asked.append((real.__name__, bound.arguments.get("using", "default")))
            bound.arguments["using"] = "default"  # the one database the tests have
            return real(*bound.args, **bound.kwargs)

        return call

    names = ("causes", "cause", "dead_letters", "retry_cause", "delete_cause")
    calls = SimpleNamespace(**{name: on_default(getattr(failure_groups, name)) for name in names})
    monkeypatch.setattr(failure_groups_admin, "failure_groups", calls)
    client = staff(superuser=True)
    with override_settings(DATABASE_ROUTERS=[f"{__name__}._JobsElsewhere"]):
        assert declined in client.get(PAGE).content.decode()
        assert "3 dead letters" in visible(client.get(f"{PAGE}retry/?cause={declined}").content.decode())
        client.post(f"{PAGE}retry/?cause={declined}", {"post": "yes"})
        client.post(f"{PAGE}delete/?cause={refund}", {"post": "yes"})
    assert Job.objects.filter(status=JobStatus.READY).count() == 3 and Job.objects.count() == 3
    assert sorted(set(asked)) == [
        ("cause", "jobs"),
        ("causes", "jobs"),
        ("dead_letters", "jobs"),
        ("delete_cause", "jobs"),
        ("retry_cause", "jobs"),
    ]


def test_a_post_without_the_csrf_token_changes_nothing():
    declined, _refund = failures()
    client = staff(superuser=True)
    assert client.post(f"{PAGE}delete/?cause={declined}", {"post": "yes"}, csrf=False).status_code == 403
    assert Job.objects.count() == 4
