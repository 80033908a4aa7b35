"""observability/missing_causes.py: dead letters stored without a cause get theirs, a bounded batch a pass."""

import datetime
import io
import logging

import pytest
from django.core.management import call_command
from django.utils import timezone

from django_dbjobs import enqueue
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.observability import missing_causes
from django_dbjobs.observability.fingerprints import fingerprint
from django_dbjobs.operations import retention
from django_dbjobs.testing import run_jobs
from django_dbjobs.worker import Worker
from tests import jobs

from .admin_helpers import failed_job

pytestmark = pytest.mark.django_db(transaction=True)


def stored_without_causes():
    """Two dead letters of declined(), one of refund_declined(), one stored with no error record,
    their causes then lost (as a worker on older code writes them); return the causes they had."""
    enqueue(jobs.declined, 1)
    enqueue(jobs.declined, 2)
    enqueue(jobs.refund_declined, 3)
    run_jobs()
    legacy = failed_job(errors=[])
    causes = dict(Job.objects.filter(status=JobStatus.FAILED).values_list("pk", "error_fingerprint"))
    causes[legacy.pk] = fingerprint({"summary": "RuntimeError: boom"})
    assert len(set(causes.values())) == 3
    Job.objects.update(error_fingerprint=None)
    return causes


def causes_now():
    return dict(Job.objects.filter(status=JobStatus.FAILED).values_list("pk", "error_fingerprint"))


def test_dead_letters_without_a_cause_get_the_one_they_would_have_had_and_a_second_pass_does_nothing(caplog):
    causes = stored_without_causes()
    ready = enqueue(jobs.add, 1, 1)
    with caplog.at_level(logging.INFO, logger="django_dbjobs"):
        assert missing_causes.fill_in() == 4
    assert causes_now() == causes
    assert Job.objects.get(pk=ready.pk).error_fingerprint is None, "only dead letters"
    (line,) = [r for r in caplog.records if "without a cause" in r.getMessage()]
    assert (
        line.getMessage() == "Gave dead letters stored without a cause theirs count=4" and line.job_count == 4
    )
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="django_dbjobs"):
        assert missing_causes.fill_in() == 0
    assert "without a cause" not in caplog.text, "logged only when it did anything"


def test_error_records_of_an_older_shape_get_the_cause_of_their_last_error():
    for errors in ({"summary": "x"}, ["RuntimeError: boom"], []):
        failed_job(errors=errors)  # last_error: "RuntimeError: boom"
    Job.objects.update(error_fingerprint=None)
    assert missing_causes.fill_in() == 3
    assert set(causes_now().values()) == {fingerprint({"summary": "RuntimeError: boom"})}


def test_a_pass_is_bounded_and_takes_the_newest_first():
    causes = stored_without_causes()
    now = timezone.now()
    by_age = list(causes)  # finished one hour apart: the first the newest
    for hours, pk in enumerate(by_age):
        Job.objects.filter(pk=pk).update(finished_at=now - datetime.timedelta(hours=hours))
    assert missing_causes.fill_in(batch_size=3) == 3
    filled = {pk for pk, cause in causes_now().items() if cause is not None}
    assert filled == set(by_age[:3])
    assert missing_causes.fill_in(batch_size=3) == 1
    assert causes_now() == causes


def test_a_dead_letter_retried_between_the_pick_and_the_write_is_left_alone(monkeypatch):
    causes = stored_without_causes()
    retried = next(iter(causes))
    pick = missing_causes.db.pks_on_index

    def then_retried(*args):
        picked = pick(*args)
        Job.objects.filter(pk=retried).update(status=JobStatus.READY)
        return picked

    monkeypatch.setattr(missing_causes.db, "pks_on_index", then_retried)
    assert missing_causes.fill_in() == 3
    assert Job.objects.get(pk=retried).error_fingerprint is None


def test_workers_fill_them_in_a_batch_a_round_as_they_prune(settings, monkeypatch):
    settings.DBJOBS_KEEP_FAILED = None
    causes = stored_without_causes()
    monkeypatch.setattr(missing_causes, "BATCH_SIZE", 3)
    pruner = retention.Pruner("default")
    pruner.prune_if_due()
    assert sum(cause is not None for cause in causes_now().values()) == 3
    pruner.prune_if_due()  # a full batch: the next round a second later, not at once
    assert sum(cause is not None for cause in causes_now().values()) == 3
    pruner._next = 0
    pruner.prune_if_due()
    assert causes_now() == causes
    Job.objects.update(error_fingerprint=None)
    monkeypatch.undo()
    Worker(burst=True).run()  # a worker does it as it goes
    assert causes_now() == causes


def test_prune_jobs_fills_them_all_in_and_says_so(monkeypatch):
    causes = stored_without_causes()
    monkeypatch.setattr(missing_causes, "BATCH_SIZE", 2)  # several passes
    out = io.StringIO()
    call_command("prune_jobs", "--dry-run", stdout=out)
    assert "failed: would give 4 dead letters stored without a cause theirs." in out.getvalue()
    assert set(causes_now().values()) == {None}
    out = io.StringIO()
    call_command("prune_jobs", stdout=out)
    assert "failed: gave 4 dead letters stored without a cause theirs." in out.getvalue()
    assert causes_now() == causes
    out = io.StringIO()
    call_command("prune_jobs", stdout=out)
    assert "without a cause" not in out.getvalue()


def test_before_the_index_of_causes_is_built_a_pass_waits_for_it(monkeypatch):
    """Workers may start before migration 0003 (index-only): a pass then does nothing, never an
    error (MySQL/MariaDB's FORCE INDEX would name an index that is not there yet)."""
    from django.db import connection

    stored = stored_without_causes()
    index = next(i for i in Job._meta.indexes if i.name == missing_causes.CAUSE_INDEX)
    monkeypatch.setattr(missing_causes, "_indexed", set())
    with connection.schema_editor() as editor:
        editor.remove_index(Job, index)
    try:
        assert missing_causes.fill_in("default") == 0
        assert causes_now() == dict.fromkeys(stored)
    finally:
        with connection.schema_editor() as editor:
            editor.add_index(Job, index)
    assert missing_causes.fill_in("default") == len(stored)
    assert causes_now() == stored
