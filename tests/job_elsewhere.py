"""@job functions outside the modules workers import (tests of the warnings about them)."""

from django_dbjobs import job


@job
def stray(value):
    return value


@job
def other_stray(value):
    return value
