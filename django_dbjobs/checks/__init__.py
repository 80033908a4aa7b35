"""System checks for the DBJOBS_ settings and the databases (ids dbjobs.E0xx / W0xx), registered here."""

from django.core import checks
from django.db import connections

from .databases import database_errors, listen_database_errors, migration_history_errors, sqlite_warnings
from .jobs import job_module_errors, job_modules_setting_errors, unimported_job_warnings
from .metrics import metrics_token_errors
from .queues import limit_errors, queue_name_errors, unused_limit_warnings
from .schedules import schedule_errors
from .setting_names import RENAMED, unknown_setting_warnings
from .setting_values import (
    NUMBER_RULES,
    heartbeat_warnings,
    hook_errors,
    keep_errors,
    number_errors,
    switch_errors,
    timeout_errors,
)

__all__ = [
    "NUMBER_RULES",
    "RENAMED",
    "check_databases",
    "check_jobs",
    "check_settings",
    "hook_errors",
    "job_module_errors",
    "metrics_token_errors",
    "migration_history_errors",
    "schedule_errors",
    "sqlite_warnings",
    "unimported_job_warnings",
    "unknown_setting_warnings",
    "unused_limit_warnings",
]


@checks.register()
def check_settings(app_configs=None, **kwargs):
    return [
        *queue_name_errors(),
        *number_errors(),
        *job_modules_setting_errors(),
        *schedule_errors(),
        *hook_errors(),
        *timeout_errors(),
        *switch_errors(),
        *keep_errors(),
        *metrics_token_errors(),
        *heartbeat_warnings(),
        *limit_errors(),
        *unused_limit_warnings(),
        *unknown_setting_warnings(),
        *sqlite_warnings(connections.settings),
        *listen_database_errors(),
    ]


@checks.register(checks.Tags.urls)  # it imports the URLconf: not in run_jobs (worker_checks.py)
def check_jobs(app_configs=None, **kwargs):
    return unimported_job_warnings()


@checks.register(checks.Tags.database)
def check_databases(app_configs=None, databases=None, **kwargs):
    errors = []
    for alias in databases or []:
        errors.extend(database_errors(alias))
    return errors
