"""A @job defined here and imported by tests/jobs.py, so every worker registers it."""

from django_dbjobs import job


@job
def reexported(value):
    return value
