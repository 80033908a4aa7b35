"""The idempotency checker (testing.check_idempotency(), idempotency_checked(), the pytest marker):
it flags jobs whose second run, or run after a worker died, changes rows, enqueues, sends or raises."""

import pytest
from django.core import mail
from django.db import connection, connections
from django.test import TestCase, TransactionTestCase

from django_dbjobs import enqueue
from django_dbjobs.idempotency.report import RUN_AFTER_DEATH, RUN_TWICE
from django_dbjobs.models import Job, JobStatus
from django_dbjobs.testing import check_idempotency, idempotency_checked, run_jobs
from tests import idempotency_jobs as jobs
from tests.models import Entry, Ledger
from tests.server_process import wait_for


def hows(report) -> list[str]:
    return [finding.how for finding in report.findings]


class CheckerChecks:
    """The same checks, run in a TestCase (never commits) and a TransactionTestCase."""

    def test_a_job_that_adds_each_run_is_flagged_both_ways_naming_tables_and_rows(self):
        ledger = Ledger.objects.create(name="ann", balance=5)
        job = enqueue(jobs.credit, "ann", 5)
        report = check_idempotency(fail=False)
        assert hows(report) == [RUN_AFTER_DEATH, RUN_TWICE]
        for finding in report.findings:
            changed, added = finding.rows
            assert (changed.table, changed.model, changed.pk, changed.kind) == (
                "tests_ledger",
                "tests.Ledger",
                ledger.pk,
                "changed",
            )
            assert changed.values == {"balance": (10, 15)}
            assert (added.table, added.kind, added.values["text"], added.values["amount"]) == (
                "tests_entry",
                "added",
                "credit",
                5,
            )
        message = report.message()
        assert message.startswith(
            "1 job is not safe to run twice:\ntests.idempotency_jobs.credit(args=['ann', 5]"
        )
        assert f"job {job.pk}" in message
        assert f"tests_ledger (tests.Ledger) pk={ledger.pk} changed: balance 10 -> 15" in message
        assert "tests_entry (tests.Entry) pk=" in message and "added: ledger_id=" in message
        assert "run again after its worker died before storing its outcome:" in message
        # The test goes on from a single run.
        assert Ledger.objects.get(pk=ledger.pk).balance == 10
        assert Entry.objects.count() == 1
        stored = Job.objects.get(pk=job.pk)
        assert (stored.status, stored.attempts, report.jobs) == (JobStatus.SUCCESSFUL, 1, [stored])

    def test_an_assertion_error_lists_the_findings(self):
        Ledger.objects.create(name="ann")
        enqueue(jobs.credit, "ann", 5)
        with pytest.raises(AssertionError, match=r"(?s)not safe to run twice.*balance 5 -> 10"):
            check_idempotency()
        assert Ledger.objects.get(name="ann").balance == 5  # one run, even when it fails the test

    def test_update_or_create_and_get_or_create_pass(self):
        Ledger.objects.create(name="ann", balance=1)
        enqueue(jobs.set_balance, "ann", 7)
        enqueue(jobs.set_balance, "bob", 3)  # creates its ledger: a second run finds it
        report = check_idempotency()
        assert report.safe and report.findings == [] and report.unchecked == []
        assert [job.status for job in report.jobs] == [JobStatus.SUCCESSFUL] * 2
        assert dict(Ledger.objects.values_list("name", "balance")) == {"ann": 7, "bob": 3}
        assert Entry.objects.count() == 2

    def test_keyed_and_async_jobs_are_checked_too(self):
        Ledger.objects.create(name="ann")
        enqueue(jobs.set_balance, "ann", 2, unique_key="ann", concurrency_key="ledgers", concurrency_limit=1)
        enqueue(jobs.acredit, "ann", 3)
        report = check_idempotency(fail=False)
        assert [job.status for job in report.jobs] == [JobStatus.SUCCESSFUL] * 2
        assert [(finding.job.name, finding.how) for finding in report.findings] == [
            (jobs.acredit.name, RUN_AFTER_DEATH),
            (jobs.acredit.name, RUN_TWICE),
        ]
        assert report.findings[0].rows[0].values == {"balance": (5, 8)}
        assert Ledger.objects.get(name="ann").balance == 5

    def test_a_second_run_that_raises_is_flagged(self):
        enqueue(jobs.open_ledger, "ann")
        report = check_idempotency(fail=False)
        assert hows(report) == [RUN_AFTER_DEATH, RUN_TWICE]
        for finding in report.findings:
            assert finding.error.startswith("IntegrityError"), finding.error
            assert finding.rows == ()  # the failed run's writes are rolled back
        assert "raised IntegrityError" in report.message()
        assert Ledger.objects.filter(name="ann").count() == 1

    def test_rows_deleted_and_written_again_alike_are_the_same_rows(self):
        ledger = Ledger.objects.create(name="ann")
        enqueue(jobs.replace_entries, "ann", [1, 2, 2])
        assert check_idempotency().safe
        assert sorted(ledger.entries.values_list("amount", flat=True)) == [1, 2, 2]

    def test_a_job_enqueued_again_is_flagged_and_a_unique_key_fixes_it(self):
        enqueue(jobs.follow_up, "ann")
        report = check_idempotency(fail=False)
        assert hows(report) == [RUN_AFTER_DEATH, RUN_TWICE]
        for finding in report.findings:
            assert finding.rows == ()
            assert finding.enqueued == (
                "tests.idempotency_jobs.set_balance(args=['ann', 0], kwargs={}) on queue 'default'",
            )
        assert "enqueued again: tests.idempotency_jobs.set_balance(args=['ann', 0]" in report.message()
        # The child ran once, checked too (it is safe).
        assert Job.objects.filter(name=jobs.set_balance.name).count() == 1
        assert len(report.jobs) == 2

        enqueue(jobs.follow_up_once, "bob")
        assert check_idempotency().safe
        assert Job.objects.filter(name=jobs.set_balance.name).count() == 2

    def test_only_a_worker_death_shows_a_guard_written_with_the_outcome(self):
        """import_ledger's guard is set when its success is stored: run twice, it holds; run
        again after its worker died before storing the outcome, it does not."""
        Ledger.objects.create(name="ann")
        enqueue(jobs.import_ledger, "ann")
        report = check_idempotency(fail=False)
        assert hows(report) == [RUN_AFTER_DEATH]
        (added,) = report.findings[0].rows
        assert (added.model, added.kind, added.values["text"]) == ("tests.Entry", "added", "import")
        assert Entry.objects.count() == 1 and Ledger.objects.get(name="ann").imported

        Ledger.objects.create(name="bob")
        enqueue(jobs.import_ledger_in_one_transaction, "bob")
        assert check_idempotency().safe

    # Django 6.1 asks projects to configure MAILERS; the test runner's outbox is all this needs.
    @pytest.mark.filterwarnings("ignore:Django 2028 will not have a default mailer")
    def test_an_email_sent_again_is_flagged_and_the_outbox_keeps_one_run(self):
        enqueue(jobs.welcome, "ann")
        report = check_idempotency(fail=False)
        assert [finding.emails for finding in report.findings] == [("'Welcome, ann' to ann@example.com",)] * 2
        assert [message.subject for message in mail.outbox] == ["Welcome, ann"]

    def test_ignored_models_and_fields_are_left_out(self):
        Ledger.objects.create(name="ann")
        enqueue(jobs.credit, "ann", 5)
        assert check_idempotency(ignore=["tests.Ledger.balance", "tests.entry"]).safe

    def test_a_bad_ignore_name_is_refused_before_any_job_runs(self):
        job = enqueue(jobs.set_balance, "ann", 1)
        for bad, error in [
            (["tests.Nothing"], "'tests.Nothing' names no installed model"),
            (["tests.Ledger.nothing"], "tests.Ledger has no field 'nothing'"),
            ("tests.Ledger", "a list of names"),
        ]:
            with pytest.raises(ValueError, match=error):
                check_idempotency(ignore=bad)
        assert Job.objects.get(pk=job.pk).status == JobStatus.READY

    def test_a_failing_job_is_left_unchecked_and_recorded_as_run_jobs_records_it(self):
        enqueue(jobs.credit, "nobody", 1)  # Ledger.DoesNotExist
        report = check_idempotency()
        assert report.safe and [reason for _, reason in report.unchecked] == [
            "its run did not succeed (FAILED)"
        ]
        assert report.jobs[0].status == JobStatus.FAILED

    def test_a_resumable_walk_is_checked_from_where_its_run_started(self):
        """Its checkpoint at the end would make any second run walk nothing: the run after a
        death starts where the first did, as one that died before its checkpoints did."""
        Ledger.objects.create(name="ann", balance=0)
        enqueue(jobs.credit_each, ["ann"])
        report = check_idempotency(fail=False)
        assert RUN_AFTER_DEATH in hows(report)
        assert Ledger.objects.get(name="ann").balance == 1

    def test_a_job_handing_itself_back_is_left_unchecked_and_handed_back(self):
        job = enqueue(jobs.hand_back_first)
        report = check_idempotency()
        assert report.safe and [reason for _, reason in report.unchecked] == [
            "it handed itself back (ResumeLater)"
        ]
        assert Job.objects.get(pk=job.pk).status == JobStatus.READY

    def test_a_job_no_worker_knows_is_handed_back_unchecked(self):
        job = Job.objects.create(name="shop.helpers.nothing")
        report = check_idempotency()
        assert report.unchecked == [(job, "no job of this name is registered")]
        assert Job.objects.get(pk=job.pk).status == JobStatus.READY

    def test_run_jobs_checks_each_job_inside_idempotency_checked(self):
        Ledger.objects.create(name="ann")
        enqueue(jobs.set_balance, "ann", 1)
        with idempotency_checked() as report:
            assert [job.status for job in run_jobs()] == [JobStatus.SUCCESSFUL]
            enqueue(jobs.credit, "ann", 2)
            with pytest.raises(AssertionError, match="tests.idempotency_jobs.credit"):
                run_jobs()
        assert len(report.jobs) == 2 and hows(report) == [RUN_AFTER_DEATH, RUN_TWICE]
        enqueue(jobs.credit, "ann", 2)
        assert len(run_jobs()) == 1  # unchecked outside the block
        assert Ledger.objects.get(name="ann").balance == 5


class TestCheckerInTestCase(CheckerChecks, TestCase):
    pass


class TestCheckerInTransactionTestCase(CheckerChecks, TransactionTestCase):
    def test_the_single_run_is_committed(self):
        Ledger.objects.create(name="ann")
        enqueue(jobs.credit, "ann", 5)
        check_idempotency(fail=False)
        assert not connection.in_atomic_block  # no transaction left open by the checker
        other = connections.create_connection("default")  # sees only what was committed
        try:
            with other.cursor() as cursor:
                cursor.execute("SELECT balance FROM tests_ledger")
                assert list(cursor.fetchall()) == [(5,)]
                cursor.execute("SELECT COUNT(*) FROM tests_entry")
                assert list(cursor.fetchall()) == [(1,)]
        finally:
            other.close()


@pytest.mark.django_db
@pytest.mark.dbjobs_idempotent
def test_the_marker_checks_the_tests_run_jobs_calls():
    Ledger.objects.create(name="ann")
    enqueue(jobs.credit, "ann", 5)
    with pytest.raises(AssertionError, match="balance 5 -> 10"):
        run_jobs()
    enqueue(jobs.set_balance, "ann", 1)
    assert len(run_jobs()) == 1


@pytest.mark.django_db
@pytest.mark.dbjobs_idempotent(ignore=["tests.Ledger.balance", "tests.Entry"])
def test_the_marker_takes_what_to_ignore(dbjobs):
    Ledger.objects.create(name="ann")
    enqueue(jobs.credit, "ann", 5)
    assert [job.status for job in dbjobs.run()] == [JobStatus.SUCCESSFUL]


@pytest.mark.django_db
def test_the_checker_says_so_when_it_cannot_stop_a_job_before_its_outcome(monkeypatch):
    """Were execution.py to name its outcome writes otherwise, the check would fail loudly,
    never pass a job it did not run as its worker's death leaves it."""
    from django_dbjobs.idempotency import checker

    monkeypatch.setattr(checker, "STORING_THE_OUTCOME", "something else")
    job = enqueue(jobs.set_balance, "ann", 1)
    with pytest.raises(RuntimeError, match=f"could not stop job {job.pk} before its outcome"):
        check_idempotency()


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_killed_before_storing_outcomes_does_what_the_checker_foresaw(run_jobs):
    """The checker's death is kill -9's: the writes stay, the sweep gives the jobs back, and they
    run again. import_ledger, flagged only by that run, imports twice; its fix, once."""
    Ledger.objects.create(name="ann")
    Ledger.objects.create(name="bob")
    enqueue(jobs.hold_worker, 2, 10)  # a busy worker holds successes back DBJOBS_ACK_DELAY
    enqueue(jobs.import_ledger, "ann")
    enqueue(jobs.import_ledger_in_one_transaction, "bob")
    worker = run_jobs("--concurrency", "3", env={"DBJOBS_TEST_ACK_DELAY": "60"})
    assert wait_for(lambda: Entry.objects.count() == 2, 30), worker.output()
    worker.process.kill()
    worker.process.wait()
    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.RUNNING}
    rescuer = run_jobs()
    assert wait_for(lambda: Job.objects.filter(status=JobStatus.SUCCESSFUL).count() == 3, 60), (
        rescuer.output()
    )
    rescuer.signal()
    assert rescuer.wait() == 0, rescuer.output()
    assert Entry.objects.filter(ledger__name="ann").count() == 2
    assert Entry.objects.filter(ledger__name="bob").count() == 1
