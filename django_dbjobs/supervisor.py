"""Supervisor: ``run_jobs --processes N`` runs N worker processes and keeps them running.

Threads share one interpreter lock, so CPU-bound jobs need processes. Each child is an
ordinary ``run_jobs`` (the same options, minus ``--processes``) with its own WorkerProcess
row, in a process group of its own: a terminal's Ctrl-C reaches only the supervisor, which
forwards every SIGTERM/SIGINT to every child. The first asks them to finish their jobs,
a second to give them back and exit at once: the worker's own rules, for the group.

A child that dies is started again after a pause that doubles while it keeps dying young
(RESTART_PAUSE up to MAX_RESTART_PAUSE); every death is logged as an error with its exit
status, and a crash loop says so. Its jobs are recovered by the other workers' sweeps, as
for any dead worker. With ``--burst`` a child that finished cleanly is not restarted. The
supervisor exits when every child has: 0 if all exited cleanly.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

logger = logging.getLogger("django_dbjobs")

#: First pause before restarting a child that died; doubles while it keeps dying young.
RESTART_PAUSE = 1.0
MAX_RESTART_PAUSE = 60.0
#: A child that ran this long before dying was healthy: its next restart starts the pauses over.
HEALTHY_AFTER = 30.0
#: Deaths in a row after which a restart is reported as a crash loop.
CRASH_LOOP = 3
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass
class Child:
    index: int
    process: subprocess.Popen | None = None
    started: float = 0.0
    #: Deaths in a row, each before HEALTHY_AFTER.
    deaths: int = 0
    restart_at: float | None = None
    done: bool = False


class Supervisor:
    """Start `processes` children running `command`; restart, signal and wait for them."""

    def __init__(self, command: list[str], processes: int, burst: bool = False):
        self.command = command
        self.burst = burst
        self.children = [Child(index) for index in range(processes)]
        self.signals = 0
        self._wake = threading.Event()

    def run(self) -> int:
        previous = {signum: signal.signal(signum, self._on_signal) for signum in STOP_SIGNALS}
        try:
            logger.info("Supervisor started pid=%s processes=%s", os.getpid(), len(self.children))
            for child in self.children:
                self._start(child)
            while not all(child.done for child in self.children):
                self._reap()
                if not self.signals:
                    self._restart_due()
                self._wake.wait(0.1)
                self._wake.clear()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        statuses = [child.process.returncode for child in self.children if child.process]
        logger.info("Supervisor stopped pid=%s exit_statuses=%s", os.getpid(), statuses)
        return 0 if all(status == 0 for status in statuses) else 1

    def _on_signal(self, signum: int, frame) -> None:
        self.signals += 1
        for child in self.children:
            if child.process is not None and child.process.poll() is None:
                child.process.send_signal(signum)  # the worker's own rules: finish, then release
            elif not child.done:
                child.done = True  # waiting for a restart: there is nothing to stop
        self._wake.set()

    def _start(self, child: Child) -> None:
        environment = {**os.environ, "DBJOBS_SUPERVISOR_PID": str(os.getpid())}
        child.process = subprocess.Popen(
            self.command,
            env=environment,
            start_new_session=True,  # Ctrl-C reaches the supervisor only; it forwards it
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        child.started = time.monotonic()
        child.restart_at = None
        logger.info("Worker process started index=%s pid=%s", child.index, child.process.pid)

    def _reap(self) -> None:
        for child in self.children:
            if child.done or child.process is None or child.restart_at is not None:
                continue
            status = child.process.poll()
            if status is None:
                continue
            ran = time.monotonic() - child.started
            if self.signals or (self.burst and status == 0):
                child.done = True
                continue
            if status == 0:  # --max-jobs reached: a fresh process takes over at once
                child.deaths, child.restart_at = 0, time.monotonic()
                logger.info(
                    "Worker process finished index=%s pid=%s; starting another",
                    child.index,
                    child.process.pid,
                )
                continue
            child.deaths = 1 if ran >= HEALTHY_AFTER else child.deaths + 1
            pause = min(RESTART_PAUSE * 2 ** (child.deaths - 1), MAX_RESTART_PAUSE)
            child.restart_at = time.monotonic() + pause
            logger.error(
                "Worker process died index=%s pid=%s exit_status=%s after=%.1fs; restarting in %.1fs%s",
                child.index,
                child.process.pid,
                _describe(status),
                ran,
                pause,
                f" (crash loop: {child.deaths} deaths in a row)" if child.deaths >= CRASH_LOOP else "",
            )

    def _restart_due(self) -> None:
        now = time.monotonic()
        for child in self.children:
            if not child.done and child.restart_at is not None and now >= child.restart_at:
                self._start(child)


def child_command(argv: list[str]) -> list[str]:
    """The command line of a child: this one, run by the same Python, without --processes."""
    program, arguments = argv[0], argv[1:]
    if os.path.basename(program) == "__main__.py":  # python -m django ...
        head = [sys.executable, "-m", os.path.basename(os.path.dirname(os.path.abspath(program)))]
    else:
        head = [sys.executable, program]
    kept, skip = [], False
    for argument in arguments:
        if skip:
            skip = False
        elif argument == "--processes":
            skip = True
        elif not argument.startswith("--processes="):
            kept.append(argument)
    return head + kept


def _describe(status: int) -> str:
    if status < 0:
        try:
            return f"{status} ({signal.Signals(-status).name})"
        except ValueError:
            return str(status)
    return str(status)


def _die_with_parent() -> None:
    """Linux: the child gets SIGTERM if the supervisor dies (kill -9), instead of running on alone."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
