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


class Replacement:
    """How to start this ``run_jobs`` afresh, read when it starts (a job may change the working
    directory, the environment or ``sys.argv`` before it gets stuck)."""

    def __init__(self, argv: list[str]):
        self.command = supervisor.child_command(argv[2:])  # argv: [program, "run_jobs", options...]
        self.directory = os.getcwd()
        self.environment = dict(os.environ)  # DBJOBS_SUPERVISOR_PID included: read before execute()

    def possible(self) -> bool:
        """Whether this system replaces a process image in place (POSIX ``exec``; not Windows,
        where ``os.exec*`` starts another process and ends this one), and the command can
        find the project again (a script, or ``python -m django`` with a settings module)."""
        settings_given = "DJANGO_SETTINGS_MODULE" in self.environment or any(
            argument.startswith("--settings") for argument in self.command
        )
        return os.name == "posix" and ("-m" not in self.command or settings_given)

    def replace(self) -> None:
        """Replace this process with the fresh ``run_jobs``; return only if the ``exec`` failed
        (the caller then exits with the stuck job's status)."""
        logger.warning("Replacing this worker process with a fresh run_jobs pid=%s", os.getpid())
        logging.shutdown()  # its handlers' buffers, before the image that holds them is gone
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        if hasattr(signal, "pthread_sigmask"):
            # The mask survives exec: the fresh image must receive its stop signals.
            signal.pthread_sigmask(signal.SIG_UNBLOCK, TAKEN_SIGNALS)
        try:
            os.chdir(self.directory)
            os.execve(self.command[0], self.command, self.environment)
        except OSError as exc:
            sys.stderr.write(f"Could not replace the worker process ({exc}); exiting.\n")
