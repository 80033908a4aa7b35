"""IdleWaiter: how an idle worker waits for new jobs from other processes, per database.

PostgreSQL sends NOTIFY from a trigger (delivered on commit only) to a LISTEN
connection per worker (to ``DBJOBS_LISTEN_DATABASE`` if set; where it would go through a
pooler, which LISTEN does not hear through, or where a handshake finds it deaf to the
worker's database, the worker probes as on MySQL instead);
SQLite bumps ``PRAGMA data_version`` when another connection commits; MySQL/MariaDB get
a cheap indexed probe at a short, adaptive interval. This process's own enqueues set the
worker's event (enqueuing/wakeup.py).
"""

from __future__ import annotations

import logging
import math
import select
import time
from collections.abc import Callable

from django.db import DatabaseError, InterfaceError

from ... import db
from ...db.listen import Listen
from ...enqueuing import wakeup
from ...models import Job
from .wake_event import WakeEvent

logger = logging.getLogger("django_dbjobs")


def _readable(fds: list[int], timeout: float) -> set[int]:
    """Those of `fds` readable (or closed) within `timeout` seconds: poll() where there is one,
    since select() fails on a descriptor numbered 1024 or more (a worker with many threads)."""
    if not hasattr(select, "poll"):
        return set(select.select(fds, [], [], timeout)[0])
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    return {fd for fd, _events in poller.poll(math.ceil(timeout * 1000))}


class IdleWaiter:
    """How an idle worker waits for new jobs from other processes, per database."""

    def __init__(
        self,
        using: str,
        event: WakeEvent,
        queues: list[str] | None,
        paused: Callable[[], frozenset[str]] = frozenset,
    ):
        self.using = using
        self.event = event
        self.queues = queues
        #: The paused queues among this worker's, as its claims last read them: the probe
        #: must not take their jobs for work, or a paused backlog would wake it for nothing.
        self.paused = paused
        self.steps = db.idle_check_steps(using)
        self.data_version = db.uses_data_version(using)
        self.listen: Listen | None = None
        self._data_version: int | None = None
        #: Whether the last wait() was ended by its own probe (MySQL/MariaDB, SQLite), not by
        #: this process's event or a NOTIFY: a probe can see work the claim will not take
        #: (a job that must run alone while one runs), which a pause then throttles.
        self.probed = False
        #: Called when a read finds notifications of queues paused or resumed (PostgreSQL): the
        #: paused queues read before are not to be trusted (paused_queues.py).
        self.on_queues: Callable[[], None] = lambda: None

    def start(self) -> None:
        if db.supports_listen(self.using):
            # Through a pooler, LISTEN is tried only when the user named the alias (then proved).
            named = db.named_listen_alias(self.using)
            alias = named or self.using
            self.listen = Listen(
                alias, direct_only=named is None, claims_allowed=alias == self.using, own=self.using
            )
            self._connect()

    @property
    def way(self) -> str:
        """How it wakes, for the worker's start line: ``listen`` (``listen:<alias>`` on
        DBJOBS_LISTEN_DATABASE's), ``probe``, ``data_version`` or ``poll`` (the poll interval only)."""
        if self.listen is not None:
            return "listen" if self.listen.using == self.using else f"listen:{self.listen.using}"
        if self.data_version:
            return "data_version"
        return "probe" if self.steps is not None else "poll"

    def stop(self) -> None:
        if self.listen is not None:
            self.listen.close()

    def claims_on(self):
        """PostgreSQL: the LISTEN connection while it is open, where the worker claims (see
        db/listen.py); None elsewhere, or while it is closed: claims use the worker's own."""
        listen = self.listen
        return listen.connection if listen is not None and listen.claims_here else None

    def claim_failed(self, connection, exc: Exception) -> bool:
        """A claim on the LISTEN `connection` (claims_on()) raised `exc`: True if that
        connection broke (closed now, opened again later: the worker claims on its own
        meanwhile); False if the error is not that connection's."""
        return self.listen.failed(connection, exc)

    def listen_session(self) -> int | None:
        """PostgreSQL: the LISTEN session open now, if it hears of queues paused or resumed
        (Listen.queue_session); None elsewhere, or closed."""
        return self.listen.queue_session if self.listen is not None else None

    @property
    def listening(self) -> bool:
        """PostgreSQL: whether the LISTEN connection is open now."""
        return self.listen is not None and self.listen.listening

    def wait(self, timeout: float, probe: bool = True) -> bool:
        """Wait up to `timeout` seconds; return True if there may be new work.

        Without `probe`, only this process's wake-ups end the wait early (the worker
        has no free thread, so other processes' new jobs can wait).
        """
        self.probed = False
        if self.listen is not None:
            return self._wait_listening(timeout)
        steps = self.steps
        if steps is None or not probe:
            woken = self.event.wait(timeout)
            self.event.clear()
            return woken
        step, longest = steps
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            if self.event.wait(min(step, remaining)):
                self.event.clear()
                return True
            if self._changed():
                self.probed = True
                return True
            step = min(step * 1.5, longest)
        return False

    def _wait_listening(self, timeout: float) -> bool:
        """PostgreSQL: wait for the event or a NOTIFY, in one poll() (see wake_event.py).

        A NOTIFY ends the wait whether or not the caller would probe, as the event does,
        and the loop decides what a wake-up is worth. The socket is read on every call,
        even when the event is already set: a LISTEN backend whose client does not read
        blocks on sending, and holds back the server's notification queue meanwhile.
        """
        event, listen = self.event, self.listen
        deadline = time.monotonic() + timeout
        while True:
            self._connect()
            if self.listen is None:  # a pooler: it probes from now on (the event says look now)
                event.clear()
                return True
            # Read on every turn, even one the event ends: a busy worker's too.
            if self._read() or event.is_set():
                event.clear()
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if not listen.listening:
                event.wait(min(remaining, max(listen.retry_in(), 0.01)))
                continue
            try:
                _readable([listen.fileno(), event.fileno()], remaining)
            except Exception as exc:  # noqa: BLE001 - no socket to wait on: open another later
                listen.lost(exc)

    def _read(self) -> bool:
        """Take the notifications that arrived, without waiting: whether there were any."""
        heard = self.listen.read()
        if heard.queues:
            self.on_queues()
        if heard.schedules:
            wakeup.schedules_changed()
        return any(heard)

    def _connect(self) -> None:
        """(Re)open the LISTEN connection when due; once open, look for work as if notified.
        If it would go through a pooler, probe instead, from now on."""
        listen = self.listen
        opened = listen.connect()
        if listen.pooled and listen.direct_only:
            self._probe_instead(
                f"database {listen.using!r} goes through a connection pooler (PgBouncer?), "
                "where LISTEN does not hear"
            )
        elif listen.unheard:
            self._probe_instead(
                f"LISTEN through database {listen.using!r} heard nothing of database {self.using!r}: "
                "a transaction pooler, or another database than the worker's"
            )
        elif not opened:
            return
        elif listen.pooled and listen.sessions == 1:
            logger.info(
                "Wake-ups: LISTEN through a pooler on database %r hears this one (session pooling)",
                listen.using,
            )
        self.event.set()  # notifications sent while it was closed are lost:
        wakeup.schedules_changed()  # look again for jobs and schedules

    def _probe_instead(self, why: str) -> None:
        """The LISTEN connection does not hear, for reason `why`: probe from now on, and say so."""
        self.listen, self.steps = None, db.PROBE_STEPS
        first, longest = self.steps
        logger.warning(
            "Wake-ups: polling every %g-%g ms: %s; set DBJOBS_LISTEN_DATABASE to a direct connection",
            first * 1000,
            longest * 1000,
            why,
        )

    def _changed(self) -> bool:
        try:
            if self.data_version:
                version = db.data_version(self.using)
                changed = self._data_version is not None and version != self._data_version
                self._data_version = version
                return changed
            paused = self.paused()
            if paused and not self.queues:
                # Telling a paused backlog from other work means reading each paused job:
                # while queues are paused, the poll interval brings the next look instead.
                return False
            queues = [name for name in self.queues or [] if name not in paused]
            if self.queues and not queues:
                return False  # every queue of this worker is paused
            return Job.objects.using(self.using).claimable().for_queues(queues).exists()
        except (DatabaseError, InterfaceError):
            return True  # let the claim meet the error and back off
