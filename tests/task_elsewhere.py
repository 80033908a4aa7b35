"""A task outside the modules workers import (tests of the warning about it)."""

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task


@task
def stray(value):
    return value
