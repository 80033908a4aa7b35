"""Cron errors where users meet them: full_clean(), the admin form, check E017, the worker's sync and log."""

import json
import logging

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.test import override_settings

from django_dbjobs import checks
from django_dbjobs.exceptions import InvalidSchedule
from django_dbjobs.models import Schedule
from django_dbjobs.schedules.scheduler import Scheduler
from tests.admin_helpers import schedule_form, staff

pytestmark = pytest.mark.django_db(transaction=True)

OUT_OF_RANGE = "The minute field of the cron expression '61 * * * *' is 61; minutes run from 0 to 59."
NEVER = "The cron expression '0 0 31 2 *' never matches: February has no day 31."
UNKNOWN_ZONE = "Unknown timezone 'Mars/Olympus_Mons'. Use an IANA name such as 'Europe/Paris' or 'UTC'."


def test_full_clean_reports_a_bad_cron_expression_and_a_bad_timezone_together():
    schedule = Schedule(name="both", cron="61 * * * *", timezone="Mars/Olympus_Mons", job="tests.jobs.tick")
    with pytest.raises(ValidationError) as caught:
        schedule.full_clean()
    assert caught.value.message_dict["cron"] == [OUT_OF_RANGE]
    assert caught.value.message_dict["timezone"] == [UNKNOWN_ZONE]
    assert not Schedule.objects.exists()


def test_the_admin_form_shows_the_cron_and_the_timezone_errors_at_once():
    client = staff(superuser=True)
    data = schedule_form(name="both", job="tests.jobs.tick", cron="0 0 31 2 *", timezone="Mars/Olympus_Mons")
    response = client.post("/admin/django_dbjobs/schedule/add/", data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert (errors.get("cron"), errors.get("timezone")) == ([NEVER], [UNKNOWN_ZONE]), errors
    assert not Schedule.objects.exists()


def test_check_e017_and_the_workers_sync_say_which_field_is_wrong():
    schedules = {
        "minutes": {"job": "tests.jobs.tick", "cron": "61 * * * *", "timezone": "Mars/Olympus_Mons"},
        "february": {"job": "tests.jobs.tick", "cron": "0 0 31 2 *"},
    }
    with override_settings(DBJOBS_SCHEDULES=schedules):
        errors = [e.msg for e in checks.check_settings() if e.id == "dbjobs.E017"]
        assert errors == [
            f"DBJOBS_SCHEDULES['minutes']['timezone']: {UNKNOWN_ZONE}",
            f"DBJOBS_SCHEDULES['minutes']['cron']: {OUT_OF_RANGE}",
            f"DBJOBS_SCHEDULES['february']['cron']: {NEVER}",
        ]
        with pytest.raises(InvalidSchedule) as caught:
            Scheduler("tests:1").sync_settings()
    assert str(caught.value) == " ".join(errors)
    assert not Schedule.objects.exists()


def test_a_row_whose_expression_never_matches_is_logged_and_listed_in_our_words(caplog, capsys):
    Schedule.objects.create(name="broken", cron="0 3 * * *", job="tests.jobs.tick")
    Schedule.objects.update(cron="0 0 31 2 *")  # written behind validation's back
    with caplog.at_level(logging.ERROR, logger="django_dbjobs"):
        Scheduler("tests:1").fire_due()
    assert f"Schedule cannot fire name=broken: InvalidSchedule: {NEVER}" in caplog.messages
    call_command("dbjobs_schedules", "--json")
    [row] = json.loads(capsys.readouterr().out)
    assert row["last_error"] == f"InvalidSchedule: {NEVER}"
