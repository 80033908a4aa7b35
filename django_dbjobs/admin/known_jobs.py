"""The registered jobs as the admin sees them: a job module that fails to import is shown, not raised."""

from __future__ import annotations

from django.utils.translation import gettext as _

from .. import registry


def known_jobs() -> dict[str, registry.RegisteredJob]:
    """Every job this process has registered, by name; those of a module that failed to import are missing."""
    return registry.discovered_with_errors()[0]


def import_error_messages() -> list[str]:
    """One sentence per job module that failed to import, for the top of the pages that list jobs."""
    return [
        _(
            "Job module %(module)s failed to import: %(error)s. Its jobs are missing from the "
            "filters and the schedule form, and a worker will not start until it is fixed "
            "(the traceback is in the log)."
        )
        % {"module": module, "error": error}
        for module, error in registry.discovered_with_errors()[1].items()
    ]
