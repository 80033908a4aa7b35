"""Supervisor: ``run_jobs --processes N`` runs N worker processes and keeps them running.

Threads share one interpreter lock, so CPU-bound jobs need processes. Each child is an
ordinary ``run_jobs`` (the same options, minus ``--processes``) with its own WorkerProcess
row, in a process group of its own: a terminal's Ctrl-C reaches only the supervisor, which
forwards every SIGTERM/SIGINT to every child (as a real-time signal, which is never merged
with a signal systemd sent the whole group: see stop_signals.py). The first asks them to
finish their jobs, a second to give them back and exit at once: the worker's own rules,
for the group.

A child that dies is started again after a pause that doubles while it keeps dying young
(RESTART_PAUSE up to MAX_RESTART_PAUSE); every death is logged as an error with its exit
status, and a crash loop says so. Its jobs are recovered by the other workers' sweeps, as
for any dead worker. With ``--burst`` a child that finished cleanly is not restarted. The
supervisor exits when every child has: 0 if all exited cleanly.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from .stop_signals import FORWARDED, forwarded, supervisor_pid

logger = logging.getLogger("django_dbjobs")

#: First pause before restarting a child that died; doubles while it keeps dying young.
RESTART_PAUSE = 1.0
MAX_RESTART_PAUSE = 60.0
#: A child that ran this long before dying was healthy: its next restart starts the pauses over.
HEALTHY_AFTER = 30.0
#: Deaths in a row after which a restart is reported as a crash loop; with --burst, given up.
CRASH_LOOP = 3
BURST_GIVE_UP = 5
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
    """Start `processes` children running `command`; restart, signal and wait for them.

    The signal handler only records the signal: forwarding, reaping and restarting all
    happen in the loop (a handler that took locks could deadlock with the code it
    interrupts).
    """

    def __init__(
        self,
        command: list[str],
        processes: int,
        burst: bool = False,
        env: dict | None = None,
        on_exit: Callable[[int], None] | None = None,
    ):
        self.command = command
        self.burst = burst
        self.env = env or {}
        #: Told the pid of each child that exited, before it is restarted (metrics_endpoint.py).
        self.on_exit = on_exit
        self.children = [Child(index) for index in range(processes)]
        self.signals: list[int] = []
        self._forwarded = 0
        #: A child exited with an error nobody asked for (or, with --burst, was given up on).
        self.failed = False

    def run(self) -> int:
        previous = {signum: signal.signal(signum, self._on_signal) for signum in STOP_SIGNALS}
        try:
            logger.info("Supervisor started pid=%s processes=%s", os.getpid(), len(self.children))
            for child in self.children:
                self._start(child)
            while not all(child.done for child in self.children):
                self._forward()
                self._reap()
                if not self.signals:
                    self._restart_due()
                time.sleep(0.05)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        statuses = [child.process.returncode for child in self.children if child.process]
        logger.info("Supervisor stopped pid=%s exit_statuses=%s", os.getpid(), statuses)
        return 1 if self.failed else 0

    def _on_signal(self, signum: int, frame) -> None:
        self.signals.append(signum)

    def _forward(self) -> None:
        """Send every signal received since the last pass to every running child."""
        while self._forwarded < len(self.signals):
            signum = self.signals[self._forwarded]
            self._forwarded += 1
            for child in self.children:
                if child.process is not None and child.process.poll() is None:
                    child.process.send_signal(forwarded(signum))  # the worker's rules: finish, then release
                elif child.restart_at is not None:
                    child.done = True  # waiting for a restart: there is nothing to stop

    def _start(self, child: Child) -> None:
        environment = {**os.environ, **self.env, "DBJOBS_SUPERVISOR_PID": str(os.getpid())}
        child.process = subprocess.Popen(
            self.command,
            env=environment,
            start_new_session=True,  # Ctrl-C reaches the supervisor only; it forwards it
        )
        child.started = time.monotonic()
        child.restart_at = None
        logger.info("Worker process started index=%s pid=%s", child.index, child.process.pid)

    def _exited(self, index: int, pid: int) -> None:
        """Tell on_exit; its failure is logged, never the end of the supervisor (orphaning its children)."""
        if self.on_exit is None:
            return
        try:
            self.on_exit(pid)
        except Exception:
            logger.exception(
                "The exit callback failed for worker process index=%s pid=%s; supervising on", index, pid
            )

    def _reap(self) -> None:
        for child in self.children:
            if child.done or child.process is None or child.restart_at is not None:
                continue
            status = child.process.poll()
            if status is None:
                continue
            self._exited(child.index, child.process.pid)
            ran = time.monotonic() - child.started
            if self.signals:
                child.done = True
                # A child still starting has no handlers yet: a forwarded signal ends it, as asked.
                if status != 0 and -status not in (*STOP_SIGNALS, *FORWARDED.values()):
                    self.failed = True
                continue
            if self.burst and status == 0:
                child.done = True
                continue
            if status == 0 and ran >= 1.0:  # --max-jobs reached: a fresh process takes over at once
                child.deaths, child.restart_at = 0, time.monotonic()
                logger.info(
                    "Worker process finished index=%s pid=%s; starting another",
                    child.index,
                    child.process.pid,
                )
                continue
            self.failed = self.failed or (self.burst and status != 0)
            child.deaths = 1 if ran >= HEALTHY_AFTER else child.deaths + 1
            if self.burst and child.deaths >= BURST_GIVE_UP:
                child.done = True
                logger.error(
                    "Worker process died index=%s exit_status=%s; %s deaths in a row, giving up (--burst)",
                    child.index,
                    _describe(status),
                    child.deaths,
                )
                continue
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


def gone(parent: int | None) -> bool:
    """Whether this worker was started by --processes (`parent`: its pid) and that process has gone."""
    return parent is not None and os.getppid() != parent


def supervised() -> bool:
    """Whether this process is a child of a ``run_jobs --processes`` supervisor."""
    return supervisor_pid() is not None


def child_command(arguments: list[str]) -> list[str]:
    """A child's command line: this program (``manage.py``, with whatever it sets up) or
    ``python -m django``, running ``run_jobs`` with these arguments, never --processes."""
    script = sys.argv[0] if sys.argv else ""
    if script.endswith(".py") and os.path.basename(script) != "__main__.py" and os.path.isfile(script):
        program = [os.path.abspath(script)]
    else:
        program = ["-m", "django"]
    return [sys.executable, *_interpreter_flags(), *program, "run_jobs", *arguments]


def child_environment() -> dict[str, str]:
    """What a child needs to find this project: the settings module and the import path."""
    from django.conf import settings

    paths = [os.getcwd(), *(p for p in sys.path if p and os.path.isdir(p) and "site-packages" not in p)]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    return {"DJANGO_SETTINGS_MODULE": settings.SETTINGS_MODULE, "PYTHONPATH": os.pathsep.join(paths)}


def _interpreter_flags() -> list[str]:
    return subprocess._args_from_interpreter_flags()  # -X, -W, -O ... as this process has them


def _describe(status: int) -> str:
    if status < 0:
        try:
            return f"{status} ({signal.Signals(-status).name})"
        except ValueError:
            return str(status)
    return str(status)
