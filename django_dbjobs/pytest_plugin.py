"""The ``dbjobs`` pytest fixture (registered through the ``pytest11`` entry point).

Loaded in every pytest session of a project that has django-dbjobs installed, so it
imports nothing from Django until a test asks for the fixture.
"""

from __future__ import annotations

import pytest


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
