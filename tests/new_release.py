"""Jobs only a newer release of the project has: workers load it with DBJOBS_TEST_NEW_RELEASE=1."""

from django_dbjobs import job


@job
def new_feature(value):
    return f"new {value}"
