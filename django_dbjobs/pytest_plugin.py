"""The ``dbjobs`` fixture and ``dbjobs_idempotent`` marker (registered through the ``pytest11`` entry point).

Loaded in every pytest session of a project that has django-dbjobs installed, so it
imports nothing from Django until a test asks for the fixture.
"""

from __future__ import annotations

import pytest


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "dbjobs_idempotent(ignore=()): check that each job the test's run_jobs() calls run is safe "
        "to run twice (django_dbjobs.testing.idempotency_checked).",
    )


class DbJobs:
    """What the ``dbjobs`` fixture gives a test: the jobs enqueued so far, and a way to run them."""

    def __init__(self, captured):
        #: Jobs enqueued since the test started (a CapturedJobs list).
        self.enqueued = captured

    def run(self, queues=None, **options):
        """Run due jobs in the test's thread; see django_dbjobs.testing.run_jobs()."""
        from django_dbjobs.testing import run_jobs

        return run_jobs(queues, **options)


@pytest.fixture
def dbjobs():
    """Capture the jobs a test enqueues (``dbjobs.enqueued``) and run them (``dbjobs.run()``).

    Needs database access: mark the test ``@pytest.mark.django_db``.
    """
    from django_dbjobs.testing import capture_jobs

    with capture_jobs() as captured:
        yield DbJobs(captured)


@pytest.fixture(autouse=True)
def _dbjobs_idempotent(request):
    """Wrap a test marked ``@pytest.mark.dbjobs_idempotent`` in idempotency_checked()."""
    marker = request.node.get_closest_marker("dbjobs_idempotent")
    if marker is None:
        yield
        return
    from django_dbjobs.testing import idempotency_checked

    with idempotency_checked(*marker.args, **marker.kwargs):
        yield
