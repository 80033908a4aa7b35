"""The system checks run_jobs runs: Django's and ours, less those that load what a worker never uses.

A management command runs every system check before it starts. Two kinds load code a
worker never runs, and keep it in memory for the worker's life:

- ``urls`` checks import the URLconf, and with it every view, form and template tag of
  the project (``dbjobs.W004``, which looks for jobs the workers would not import, is one
  of them: ``manage.py check`` and ``runserver`` run it);
- ``commands`` checks load the ``migrate`` and ``makemigrations`` commands, and with them
  the migration autodetector, writer and questioner.

Left out of run_jobs, a worker starts about 1.7 MiB smaller with the example project
(docs/performance.rst). ``manage.py check`` still runs them all.
"""

from __future__ import annotations

import contextlib

from django.core import checks

#: The tags of the checks run_jobs leaves out.
LEFT_OUT = frozenset({checks.Tags.urls, checks.Tags.commands})


@contextlib.contextmanager
def without_unused_checks():
    """Leave the LEFT_OUT checks out of Django's registry for the block (run_jobs' check())."""
    registry = checks.registry.registry
    kinds = [registry.registered_checks, registry.deployment_checks]
    removed = [{check for check in kind if LEFT_OUT & set(getattr(check, "tags", ()))} for kind in kinds]
    for kind, gone in zip(kinds, removed, strict=True):
        kind.difference_update(gone)
    try:
        yield
    finally:
        for kind, gone in zip(kinds, removed, strict=True):
            kind.update(gone)
