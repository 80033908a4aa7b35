"""What tests of Django's Tasks framework share: the tests' tasks module, or a skip without it."""

import pytest


def tasks_or_skip():
    """tests.tasks, or skip the test (or the module, at import) when no Tasks framework is installed."""
    tasks = pytest.importorskip("tests.tasks")
    if tasks.task is None:
        pytest.skip(
            "neither django.tasks nor the django-tasks backport is installed", allow_module_level=True
        )
    return tasks
