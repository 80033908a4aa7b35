"""Where `run_jobs` prints log lines that the project's LOGGING does not show: its stderr.

The worker's own lines (the ``django_dbjobs`` logger) go there unless the project
configured that logger. A ``@task``'s final failure is logged by Django's task logger
(``django.tasks``, ``django_tasks`` on the backport), which Django's default LOGGING
prints only with DEBUG on (and mails to ADMINS otherwise): the worker prints those
records too, unless a handler of the project would already print them, so that a failed
task is never missing from the worker's output, nor printed twice.
"""

from __future__ import annotations

import logging

from django.utils.log import AdminEmailHandler

#: Django's task logger, and the backport's.
TASK_LOGGERS = ("django.tasks", "django_tasks")
FORMAT = "%(asctime)s %(levelname)s %(message)s"


def show(stream, verbosity: int) -> None:
    """Print the worker's log lines, and Django's task failures nothing else prints, to `stream`."""
    ours = logging.getLogger("django_dbjobs")
    if not ours.handlers:
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logging.Formatter(FORMAT))
        ours.addHandler(handler)
        ours.setLevel({0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG))
    for name in TASK_LOGGERS:
        logger = logging.getLogger(name)
        if not logger.handlers:
            logger.addHandler(UnprintedTaskFailures(stream))


class UnprintedTaskFailures(logging.StreamHandler):
    """Print a task logger's ERROR records that no handler of the project prints."""

    def __init__(self, stream):
        super().__init__(stream)
        self.setLevel(logging.ERROR)
        self.setFormatter(logging.Formatter(FORMAT))

    def filter(self, record: logging.LogRecord) -> bool:
        return super().filter(record) and not _printed_elsewhere(record)


def _printed_elsewhere(record: logging.LogRecord) -> bool:
    """Whether a handler on the way up from `record`'s logger prints it (mails and nulls do not count)."""
    logger: logging.Logger | None = logging.getLogger(record.name)
    while logger is not None:
        for handler in logger.handlers:
            if isinstance(handler, UnprintedTaskFailures | AdminEmailHandler | logging.NullHandler):
                continue
            if record.levelno >= handler.level and handler.filter(record):
                return True
        if not logger.propagate:
            return False
        logger = logger.parent
    return False
