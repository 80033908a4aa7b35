import pytest
from django.core import checks
from django.db import connection, connections

from django_dbjobs import registry
from django_dbjobs.checks import check_databases, check_settings, sqlite_warnings
from django_dbjobs.db import SQLITE_RECOMMENDED_OPTIONS


def ids(errors):
    return sorted(e.id for e in errors)


def test_default_settings_pass_the_checks():
    assert check_settings() == []


@pytest.mark.parametrize(
    "setting, value, check_id",
    [
        ("DBJOBS_QUEUES", "default", "dbjobs.E001"),
        ("DBJOBS_QUEUES", ["default", "not ok"], "dbjobs.E001"),
        ("DBJOBS_DEFAULT_QUEUE", "has space", "dbjobs.E002"),
        ("DBJOBS_POLL_INTERVAL", 0, "dbjobs.E003"),
        ("DBJOBS_POLL_INTERVAL", "1", "dbjobs.E003"),
        ("DBJOBS_SHUTDOWN_GRACE", -1, "dbjobs.E004"),
        ("DBJOBS_DEFAULT_MAX_ATTEMPTS", 0, "dbjobs.E005"),
        ("DBJOBS_DEFAULT_PRIORITY", 500, "dbjobs.E006"),
        ("DBJOBS_RETRY_BACKOFF", None, "dbjobs.E007"),
        ("DBJOBS_RETRY_BACKOFF_MAX", -5, "dbjobs.E008"),
        ("DBJOBS_MAX_PAYLOAD_BYTES", 1.5, "dbjobs.E009"),
        ("DBJOBS_JOB_MODULES", "shop.jobs", "dbjobs.E010"),
        ("DBJOBS_HEARTBEAT_INTERVAL", 0, "dbjobs.E012"),
        ("DBJOBS_HEARTBEAT_TIMEOUT", "30", "dbjobs.E013"),
        ("DBJOBS_SWEEP_INTERVAL", -1, "dbjobs.E014"),
        ("DBJOBS_UNKNOWN_JOB_GRACE", "1h", "dbjobs.E016"),
        ("DBJOBS_HEARTBEAT_TIMEOUT", 0.4, "dbjobs.W002"),
        ("DBJOBS_ADMIN_MASKED_ARGUMENTS", "password", "dbjobs.E019"),
        ("DBJOBS_ADMIN_MASKED_JOBS", ["ok", ""], "dbjobs.E020"),
        ("DBJOBS_ASYNC_CLAIM_COMMIT", 1, "dbjobs.E028"),
        ("DBJOBS_PREPARED_STATEMENTS", "yes", "dbjobs.E029"),
        ("DBJOBS_METRICS_TOKEN", 12345, "dbjobs.E033"),
        ("DBJOBS_METRICS_TOKEN", b"bytes", "dbjobs.E033"),
        ("DBJOBS_TRACING", "on", "dbjobs.E034"),
        ("DBJOBS_LISTEN_DATABASE", "direct", "dbjobs.E035"),
        ("DBJOBS_LISTEN_DATABASE", ["default"], "dbjobs.E035"),
        ("DBJOBS_LISTEN_DATABASE", {"default": "direct"}, "dbjobs.E035"),  # no such alias
        ("DBJOBS_LISTEN_DATABASE", {"elsewhere": "default"}, "dbjobs.E035"),  # no such worker alias
    ],
)
def test_bad_settings_are_reported(settings, setting, value, check_id):
    setattr(settings, setting, value)
    errors = check_settings()
    assert ids(errors) == [check_id]
    assert setting in errors[0].msg and errors[0].hint


@pytest.mark.parametrize(
    "setting, hint",
    [
        ("DBJOBS_PREPARED_CLAIMS", "DBJOBS_PREPARED_STATEMENTS"),
        ("DBJOBS_POLL_INTERVALL", "DBJOBS_POLL_INTERVAL"),
        ("DBJOBS_ZZZ", "settings reference"),
    ],
)
def test_a_setting_that_is_not_ours_is_warned_about(settings, setting, hint):
    setattr(settings, setting, False)
    warnings = check_settings()
    assert ids(warnings) == ["dbjobs.W003"]
    assert setting in warnings[0].msg and hint in warnings[0].hint


@pytest.mark.parametrize("token", [None, "", "s3cret"])
def test_a_metrics_token_is_none_or_a_string(settings, token):
    settings.DBJOBS_METRICS_TOKEN = token
    assert ids(check_settings()) == []


def test_listen_database_must_be_a_postgresql_alias(settings, monkeypatch):
    """DBJOBS_LISTEN_DATABASE: an alias of DATABASES on PostgreSQL (a second one, here)."""
    monkeypatch.setitem(connections.settings, "direct", connections.settings["default"])
    for setting in ("direct", {"default": "direct"}):  # for every worker, or per worker alias
        settings.DBJOBS_LISTEN_DATABASE = setting
        try:
            errors = check_settings()
        finally:
            del connections["direct"]  # the connection object made for it (never connected)
        if connection.vendor == "postgresql":
            assert errors == []
        else:
            assert ids(errors) == ["dbjobs.E035"]
            assert "PostgreSQL only" in errors[0].msg and "'direct'" in errors[0].msg


def test_listen_database_none_for_a_worker_alias_means_its_own(settings):
    settings.DBJOBS_LISTEN_DATABASE = {"default": None}  # as conf.py says: that alias's own
    assert "dbjobs.E035" not in ids(check_settings())


def test_default_queue_must_be_in_the_queue_list(settings):
    settings.DBJOBS_QUEUES = ["emails"]
    assert ids(check_settings()) == ["dbjobs.E002"]


def test_sqlite_without_immediate_transactions_or_wal_is_warned_about():
    databases = {
        "default": {"ENGINE": "django.db.backends.postgresql", "OPTIONS": {}},
        "good": {"ENGINE": "django.db.backends.sqlite3", "OPTIONS": dict(SQLITE_RECOMMENDED_OPTIONS)},
        "other": {"ENGINE": "django.db.backends.sqlite3", "OPTIONS": {}},
    }
    warnings = sqlite_warnings(databases)
    assert ids(warnings) == ["dbjobs.W001"]
    assert "'other'" in warnings[0].msg and "transaction_mode" in warnings[0].msg
    assert "IMMEDIATE" in warnings[0].hint and "journal_mode=WAL" in warnings[0].hint


@pytest.mark.django_db
def test_database_check_accepts_this_database():
    assert check_databases(databases=["default"]) == []
    assert connection.features.has_select_for_update_skip_locked or connection.vendor == "sqlite"


def test_checks_are_registered_with_django():
    registered = checks.registry.registry.get_checks(include_deployment_checks=False)
    assert check_settings in registered


@pytest.mark.django_db
def test_sqlite_too_old_for_the_claim_is_an_error_at_start(monkeypatch):
    from django.db import connection

    from django_dbjobs import db
    from django_dbjobs.db import support
    from django_dbjobs.exceptions import UnsupportedDatabase

    if connection.vendor != "sqlite":
        pytest.skip("the SQLite library version matters only for SQLite databases")
    monkeypatch.setattr(support, "sqlite_version", lambda: (3, 34, 1))
    (error,) = check_databases(databases=["default"])
    assert error.id == "dbjobs.E015" and "3.34.1" in error.msg
    with pytest.raises(UnsupportedDatabase, match="3.35"):
        db.ensure_supported("default")


BROKEN = "dbjobs_test_broken_jobs"


@pytest.fixture
def broken_job_module(tmp_path, monkeypatch, settings):
    """A job module that raises on import, as a jobs.py reading a missing setting does."""
    (tmp_path / f"{BROKEN}.py").write_text('raise RuntimeError("settings.SHOP_API_URL is not set")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_import_errors", None)  # as in a process that has not imported them yet
    monkeypatch.setattr(registry, "_discovered", False)
    settings.DBJOBS_JOB_MODULES = [BROKEN]


def test_a_job_module_that_fails_to_import_is_a_check_error_naming_it(broken_job_module, settings):
    settings.DBJOBS_SCHEDULES = {
        "nightly": {"job": "tests.jobs.scheduled", "cron": "0 3 * * *"},
        "orphan": {"job": f"{BROKEN}.report", "cron": "0 3 * * *"},
    }
    errors = check_settings()
    assert ids(errors) == ["dbjobs.E017", "dbjobs.E032"]
    broken, orphan = sorted(errors, key=lambda e: e.id, reverse=True)
    assert broken.obj == BROKEN and "RuntimeError: settings.SHOP_API_URL is not set" in broken.msg
    assert "DBJOBS_SCHEDULES['orphan']['job']" in orphan.msg and "fails to import" in orphan.msg


def test_a_rate_limit_on_a_queue_nothing_names_is_warned_about_with_the_closest_name(settings):
    settings.DBJOBS_QUEUE_LIMITS = {"emials": {"rate": "100/m"}, "emails": {"rate": "10/s"}}
    (warning,) = check_settings()  # emails: @job(queue="emails") in tests/jobs.py
    assert (warning.id, warning.obj) == ("dbjobs.W005", "emials")
    assert "DBJOBS_QUEUE_LIMITS limits queue 'emials'" in warning.msg
    assert warning.hint.startswith("Did you mean 'emails'?")
    settings.DBJOBS_QUEUES = ["default", "emials"]  # listed: a queue the project means
    assert check_settings() == []
