"""manage.py dbjobs_schedules before a worker synced DBJOBS_SCHEDULES, and after the setting changed."""

import json

import pytest
from django.core.management import call_command

from django_dbjobs.schedules.definitions import sync_settings

pytestmark = pytest.mark.django_db(transaction=True)

SCHEDULES = {
    "nightly": {"job": "tests.jobs.add", "cron": "30 2 * * *", "timezone": "Europe/Paris", "args": [1, 2]},
}


def listed(capsys, *args) -> str:
    call_command("dbjobs_schedules", *args)
    return capsys.readouterr().out


def test_settings_schedules_are_listed_as_not_synced_before_any_worker_started(settings, capsys):
    settings.DBJOBS_SCHEDULES = SCHEDULES
    out = listed(capsys)
    assert "No schedules" not in out
    line = next(line for line in out.splitlines() if line.startswith("nightly"))
    assert "30 2 * * *" in line and "Europe/Paris" in line
    assert "02:30:00 +01:00" in line or "02:30:00 +02:00" in line
    assert "not synced yet: a worker syncs DBJOBS_SCHEDULES when it starts" in line
    (row,) = json.loads(listed(capsys, "--json"))
    assert row["name"] == "nightly" and row["defined_in"] == "settings" and row["last_job"] is None
    assert row["next_due_local"].endswith(("T02:30:00+01:00", "T02:30:00+02:00"))
    assert row["state"].startswith("not synced yet")
    sync_settings()
    (row,) = json.loads(listed(capsys, "--json"))
    assert row["state"] == "enabled"


def test_a_changed_setting_is_shown_as_not_synced_until_a_worker_syncs_it(settings, capsys):
    settings.DBJOBS_SCHEDULES = SCHEDULES
    sync_settings()
    settings.DBJOBS_SCHEDULES = {"nightly": {**SCHEDULES["nightly"], "cron": "0 4 * * *"}}
    (row,) = json.loads(listed(capsys, "--json"))
    assert row["cron"] == "30 2 * * *", "the table's definition, the one that fires"
    assert row["state"] == (
        "enabled; changed in DBJOBS_SCHEDULES, not synced yet: a worker syncs DBJOBS_SCHEDULES when it starts"
    )
    sync_settings()
    (row,) = json.loads(listed(capsys, "--json"))
    assert (row["cron"], row["state"]) == ("0 4 * * *", "enabled")


def test_an_unsynced_schedule_that_cannot_fire_says_why(settings, capsys):
    settings.DBJOBS_SCHEDULES = {"broken": {"job": "tests.jobs.add", "cron": "0 0 31 2 *"}}
    (row,) = json.loads(listed(capsys, "--json"))
    assert row["next_due_at"] is None
    assert row["state"].startswith(
        "not synced yet: a worker syncs DBJOBS_SCHEDULES when it starts; cannot fire:"
    )
