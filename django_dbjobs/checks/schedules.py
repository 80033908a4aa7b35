"""The check of DBJOBS_SCHEDULES: each problem of a schedule, and the job modules it needs."""

from django.core import checks

from ..conf import settings
from .jobs import job_module_errors


def schedule_errors() -> list[checks.Error]:
    """One error per problem of DBJOBS_SCHEDULES, naming the schedule."""
    from ..schedules.definitions import settings_problems

    # Checking a schedule's job imports the job modules: one that raises is named here,
    # instead of its traceback stopping check, migrate and runserver.
    broken = job_module_errors() if settings.SCHEDULES else []
    return broken + [
        checks.Error(
            problem,
            hint="See 'Periodic jobs' in the docs: {'job': 'app.jobs.report', 'cron': '30 2 * * *', "
            "'timezone': 'Europe/Paris'}.",
            id="dbjobs.E017",
        )
        for problem in settings_problems()
    ]
