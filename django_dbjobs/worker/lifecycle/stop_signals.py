"""SIGTERM and SIGINT for the worker, received on a thread of their own.

A signal handled the usual way interrupts whatever system call the main thread is in.
Python retries its own calls (PEP 475), but a database driver's C code may not:
mysqlclient, interrupted while reading a reply, can leave its connection waiting for
an answer that never comes. So the worker blocks these signals in its main thread
before it starts any other (threads inherit the mask), and one thread takes them
with ``sigwait()``: no database call anywhere is ever interrupted. Where that is not
available (Windows), or for a signal delivered to a thread started earlier, ordinary
Python handlers do the same job.

A supervisor (``run_jobs --processes``) forwards a stop to its children as a real-time
signal (FORWARDED): two ordinary signals pending at once merge into one, with the first
sender's pid, so a group's SIGTERM from systemd arriving just before the supervisor's own
would swallow it. Real-time signals queue; each one is delivered.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

logger = logging.getLogger("django_dbjobs")

STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}
#: The signal a supervisor sends a child for each stop signal (where the system has them).
FORWARDED: dict[int, int] = {}
if hasattr(signal, "SIGRTMIN"):
    FORWARDED.update({signal.SIGTERM: signal.SIGRTMIN, signal.SIGINT: signal.SIGRTMIN + 1})
#: Every signal the worker takes on its signal thread (and other threads keep blocked).
TAKEN_SIGNALS = STOP_SIGNALS | set(FORWARDED.values())
_STOP_FOR = {forwarded: signum for signum, forwarded in FORWARDED.items()}


@contextmanager
def taken_signals_blocked() -> Iterator[None]:
    """Block TAKEN_SIGNALS in this thread for the block: a thread started in it inherits the mask,
    and so never takes a signal meant for the signal thread, even if started before install()."""
    masked = hasattr(signal, "pthread_sigmask")
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, TAKEN_SIGNALS) if masked else None
    try:
        yield
    finally:
        if previous is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def forwarded(signum: int) -> int:
    """The signal a supervisor sends its children for `signum`."""
    return FORWARDED.get(signum, signum)


class StopSignals:
    """Call `on_signal(signum)` for every SIGTERM/SIGINT until uninstall()."""

    def __init__(self, on_signal: Callable[[int], None]):
        self.on_signal = on_signal
        self._previous: dict = {}
        self._blocked = False
        self._done = False
        self._thread: threading.Thread | None = None

    def install(self) -> None:
        """Take the signals; call it in the main thread, before starting other threads."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in TAKEN_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        if hasattr(signal, "pthread_sigmask") and hasattr(signal, "sigwait"):
            signal.pthread_sigmask(signal.SIG_BLOCK, TAKEN_SIGNALS)
            self._blocked = True
            self._thread = threading.Thread(target=self._wait, name="dbjobs-signals", daemon=True)
            self._thread.start()

    def uninstall(self) -> None:
        """Give the signals back as they were; end the signal thread."""
        self._done = True
        if self._thread is not None:
            signal.pthread_kill(self._thread.ident, signal.SIGTERM)  # blocked there: sigwait() returns
            self._thread.join(1)
        if self._blocked:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, TAKEN_SIGNALS)
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    def _wait(self) -> None:
        supervisor = supervisor_pid()
        while not self._done:
            if supervisor is None or not hasattr(signal, "sigwaitinfo"):
                signum, sender = signal.sigwait(TAKEN_SIGNALS), None
            else:
                info = signal.sigwaitinfo(TAKEN_SIGNALS)
                signum, sender = info.si_signo, info.si_pid
            if self._done:
                return
            if signum in _STOP_FOR:
                self.on_signal(_STOP_FOR[signum])  # a supervisor's forwarded stop
                continue
            if supervisor is not None and sender not in (None, supervisor, os.getpid()):
                # A child of run_jobs --processes takes its stop signals from its supervisor
                # only: systemd (KillMode=control-group) signals the whole group too, and a
                # second signal would end the grace at once.
                logger.info(
                    "Ignoring %s from pid %s: this worker stops when its supervisor (pid %s) says so",
                    signal.Signals(signum).name,
                    sender,
                    supervisor,
                )
                continue
            self.on_signal(signum)

    def _handle(self, signum, frame) -> None:
        self.on_signal(_STOP_FOR.get(signum, signum))


_parent: list[int | None] = []


def supervisor_pid() -> int | None:
    """The pid of this process's supervisor (``run_jobs --processes``), or None; read once,
    then removed from the environment, so that a run_jobs a job starts is not taken for a
    child of it. Here, not in supervisor.py: a child takes its stop signals from it alone."""
    if not _parent:
        value = os.environ.pop("DBJOBS_SUPERVISOR_PID", "")
        _parent.append(int(value) if value.isdigit() else None)
    return _parent[0]
