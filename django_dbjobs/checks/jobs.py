"""Checks of the job code: DBJOBS_JOB_MODULES, job modules that fail to import, jobs workers never import."""

from django.core import checks

from ..conf import settings


def job_modules_setting_errors() -> list[checks.Error]:
    """DBJOBS_JOB_MODULES must be a list of module paths."""
    modules = settings.JOB_MODULES
    if isinstance(modules, list | tuple) and all(isinstance(m, str) for m in modules):
        return []
    return [
        checks.Error(
            "DBJOBS_JOB_MODULES must be a list of module paths.",
            hint="For example: DBJOBS_JOB_MODULES = ['shop.billing'].",
            id="dbjobs.E010",
        )
    ]


def job_module_errors() -> list[checks.Error]:
    """One error per job module that fails to import; its traceback is logged once."""
    from .. import registry

    return [
        checks.Error(
            f"Job module {module} failed to import: {error}.",
            hint="Its traceback is in the log (logger django_dbjobs). Workers refuse to start "
            "until it imports, and schedules of its jobs cannot be checked.",
            obj=module,
            id="dbjobs.E032",
        )
        for module, error in registry.discovered_with_errors()[1].items()
    ]


def unimported_job_warnings() -> list[checks.Warning]:
    """A registered job whose module workers do not import: they would hand its jobs back as unknown.

    Looks at the jobs registered in this process once its URLconf, and so its views, are
    imported, so a ``@job`` in a helper module a view imports is found before its first
    enqueue.
    """
    from django.urls import get_resolver

    from .. import registry
    from ..registry import discovery

    try:
        get_resolver().url_patterns  # noqa: B018 - imports the URLconf, as check_url_config does
    except Exception:  # noqa: BLE001 - a broken URLconf is Django's own check's to report
        pass

    return [
        checks.Warning(
            f"Job {registered.name} is defined in {registered.func.__module__}, which workers do not import.",
            hint=discovery.unimported_message(registered),
            obj=registered.name,
            id="dbjobs.W004",
        )
        for registered in sorted(registry.registered().values(), key=lambda r: r.name)
        if not discovery.imported_by_workers(registered)
    ]
