"""A worker that survives its own stuck job: its process image replaced by a fresh ``run_jobs``.

A thread stuck in C code (a cancelled or timed-out job in ``time.sleep()``, a socket read
without a timeout) cannot be killed; only the end of its process stops it (stuck.py).
Exiting for a supervisor to start a new process stops the whole worker where nothing
restarts it (the Quickstart's plain ``run_jobs`` in a terminal). So once the stuck job is
recorded and the other jobs have finished or gone back, the worker ``exec``s the same
``run_jobs`` command line in the same process: the old image, stuck thread and all, is
gone; the pid, the terminal, the supervisor (systemd, Docker, ``--processes``) see the
worker stay up. There is never a second process, so it costs no memory; the fresh image
starts as any worker does (a new identity, its own start-up checks).
"""

from __future__ import annotations

import logging
import os
import signal
import sys

from . import supervisor
from .stop_signals import TAKEN_SIGNALS

logger = logging.getLogger("django_dbjobs")


def possible() -> bool:
    """Whether this system replaces a process image in place (POSIX ``exec``; not Windows,
    where ``os.exec*`` starts another process and ends this one)."""
    return os.name == "posix"


def replace(argv: list[str]) -> None:
    """Replace this process with a fresh ``run_jobs`` run with `argv`'s options; return only if
    the ``exec`` failed (the caller then exits with the stuck job's status)."""
    command = supervisor.child_command(argv[2:])  # argv: [program, "run_jobs", options...]
    environment = dict(os.environ)
    parent = supervisor.supervisor_pid()  # read once and hidden from job code: handed on
    if parent is not None:
        environment["DBJOBS_SUPERVISOR_PID"] = str(parent)
    logger.warning("Replacing this worker process with a fresh run_jobs pid=%s", os.getpid())
    logging.shutdown()  # its handlers' buffers, before the image that holds them is gone
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    if hasattr(signal, "pthread_sigmask"):
        # The mask survives exec: the fresh image must receive its stop signals.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, TAKEN_SIGNALS)
    try:
        os.execve(command[0], command, environment)
    except OSError as exc:
        sys.stderr.write(f"Could not replace the worker process ({exc}); exiting.\n")
