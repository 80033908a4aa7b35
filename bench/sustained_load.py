"""bench/sustained.py's prober (claim and enqueue latency beside the load) and its long transaction."""

from __future__ import annotations

import threading
import time

from django.db import connection, connections

from bench.sustained import quantiles

#: Seconds between the prober's rounds: ten claims and ten enqueues a second.
PROBE_INTERVAL = 0.1


class Prober(threading.Thread):
    """Times one enqueue() and one claim of up to 10 jobs (then finishes them) every PROBE_INTERVAL."""

    def __init__(self, worker: str):
        super().__init__(daemon=True)
        self.worker = worker
        self._lock = threading.Lock()
        self._claims: list[float] = []
        self._enqueues: list[float] = []
        self._finishes: list[float] = []
        self._stop = threading.Event()

    def run(self) -> None:
        from bench import jobs
        from django_dbjobs import enqueue
        from django_dbjobs.models import Job

        while not self._stop.wait(PROBE_INTERVAL):
            before = time.perf_counter()
            enqueue(jobs.noop)
            enqueued = time.perf_counter()
            claimed = Job.objects.claim(self.worker, limit=10, queues=["default"])
            took = time.perf_counter()
            if claimed:
                Job.objects.finish_successes(self.worker, [(job, None) for job in claimed])
            finished = time.perf_counter()
            with self._lock:
                self._enqueues.append(enqueued - before)
                self._claims.append(took - enqueued)
                if claimed:
                    self._finishes.append(finished - took)
        connection.close()

    def take(self) -> dict:
        """The quantiles of the rounds since the last take()."""
        with self._lock:
            claims, enqueues, finishes = self._claims, self._enqueues, self._finishes
            self._claims, self._enqueues, self._finishes = [], [], []
        return {
            **quantiles("claim", claims),
            **quantiles("enqueue", enqueues),
            **quantiles("finish", finishes),
            "probes": len(claims),
        }

    def stop(self) -> None:
        self._stop.set()
        self.join(timeout=10)


class LongTransaction:
    """A session holding a snapshot open from minute START for MINUTES (``START:MINUTES``)."""

    def __init__(self, spec: str | None):
        self.start, self.minutes = (float(part) for part in spec.split(":")) if spec else (None, None)
        self.session = None
        self.done = False

    def minutes_open(self, minute: float) -> float:
        """How long it has been open at `minute` of the run."""
        return minute - self.start if self.open else 0.0

    @property
    def open(self) -> bool:
        return self.session is not None

    def at(self, minute: float) -> None:
        """Open or close the transaction as `minute` (since the run started) says."""
        if self.start is None or self.done:
            return
        if self.session is None and minute >= self.start:
            self.session = connections.create_connection("default")
            self.session.set_autocommit(False)
            with self.session.cursor() as cursor:
                if self.session.vendor == "postgresql":
                    cursor.execute("SET application_name = 'bench-long-transaction'")
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                elif self.session.vendor == "mysql":
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                cursor.execute("SELECT COUNT(*) FROM django_dbjobs_job")  # the snapshot is taken
        elif self.session is not None and minute >= self.start + self.minutes:
            self.close()

    def close(self) -> None:
        if self.session is not None:
            self.session.rollback()
            self.session.close()
            self.session = None
            self.done = True
