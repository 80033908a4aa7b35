"""Where ``run_jobs --metrics-port`` serves the worker's metrics: one process's, or a supervisor's children's.

A worker alone serves its own metrics (worker_metrics.py) on a thread. With
``--processes`` the supervisor serves one endpoint for all its children, the way
prometheus_client documents it for several processes: before the first child starts it
points ``PROMETHEUS_MULTIPROC_DIR`` at a fresh directory, where every child writes its
values; a scrape adds up every file there, so a child that died (even by SIGKILL) still
counts what it did. A directory the user set is used as it is and never removed.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import MetricsUnavailable
from ..worker.lifecycle.stop_signals import taken_signals_blocked
from . import worker_metrics

logger = logging.getLogger("django_dbjobs")

#: Where prometheus_client's processes write their values (read when it is imported).
MULTIPROCESS_DIRECTORY = "PROMETHEUS_MULTIPROC_DIR"
#: All interfaces, as exporters listen: Prometheus usually scrapes from another host or container.
DEFAULT_ADDRESS = "0.0.0.0"  # noqa: S104


def for_worker(port: int | None, address: str, child: bool = False) -> Any:
    """What a worker runs in: its metrics served on `port` (None: off), or, for a supervisor's
    `child`, only recorded, in the supervisor's directory."""
    if port is None and not child:
        return nullcontext()
    return _worker(None if child else port, address)


@contextmanager
def _worker(port: int | None, address: str) -> Iterator[None]:
    _require_client()
    worker_metrics.record()
    if port is None:
        yield
        return
    shared = os.environ.get(MULTIPROCESS_DIRECTORY)  # the user's: the processes writing there, added up
    server = serve(address, port, _collectors(shared) if shared else None)
    try:
        yield
    finally:
        close(server)


@dataclass
class Children:
    """A supervisor's endpoint: the directory its children write to, and what they need to."""

    directory: str
    #: Added to each child's environment and command line.
    environment: dict[str, str] = field(default_factory=dict)
    arguments: list[str] = field(default_factory=list)

    def exited(self, pid: int) -> None:
        """Forget what a child that exited was (its live gauges); keep what it counted."""
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid, self.directory)


def for_supervisor(port: int | None, address: str) -> Any:
    """What a supervisor runs in: None if metrics are off, else its Children endpoint, served on `port`."""
    if port is None:
        return nullcontext()
    return _supervisor(port, address)


@contextmanager
def _supervisor(port: int, address: str) -> Iterator[Children]:
    _require_client()
    given = os.environ.get(MULTIPROCESS_DIRECTORY)
    directory = given or tempfile.mkdtemp(prefix="dbjobs-metrics-")
    try:
        server = serve(address, port, _collectors(directory))
        try:
            yield Children(directory, {MULTIPROCESS_DIRECTORY: directory}, ["--metrics-child"])
        finally:
            close(server)
    finally:
        if not given:
            shutil.rmtree(directory, ignore_errors=True)


def serve(address: str, port: int, collectors: Any = None) -> Any:
    """Serve /metrics on `address`:`port` from a thread; raise MetricsUnavailable if it cannot."""
    from prometheus_client import REGISTRY, start_http_server

    try:
        # Its threads (and each request's) inherit the mask: like every thread of the worker's
        # but its signal thread, they keep the taken signals blocked (stop_signals.py).
        with taken_signals_blocked():
            started = start_http_server(
                port, addr=address, registry=REGISTRY if collectors is None else collectors
            )
    except OSError as exc:
        raise MetricsUnavailable(f"Cannot serve metrics on {address}:{port}: {exc.strerror or exc}.") from exc
    server = started[0] if isinstance(started, tuple) else started  # a (server, thread) since 0.17
    host, bound = server.server_address[:2]
    logger.info("Serving metrics url=http://%s:%s/metrics", _host(host), bound)
    return server


def close(server: Any) -> None:
    if server is not None:
        server.shutdown()
        server.server_close()


def _collectors(directory: str) -> Any:
    from prometheus_client import CollectorRegistry, multiprocess

    collectors = CollectorRegistry()
    multiprocess.MultiProcessCollector(collectors, path=directory)
    return collectors


def _require_client() -> None:
    try:
        import prometheus_client  # noqa: F401
    except ImportError as exc:
        raise MetricsUnavailable(
            "run_jobs --metrics-port needs prometheus_client: pip install 'django-dbjobs[prometheus]'."
        ) from exc


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
