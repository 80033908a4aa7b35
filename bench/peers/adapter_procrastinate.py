"""procrastinate in the side-by-side benchmark (see harness.py): its documented sync API to
enqueue, and its worker with --concurrency 2 (its default is 1)."""

import os
import sys
import time

from procrastinate import App, PsycopgConnector

app = App(connector=PsycopgConnector(conninfo=os.environ["BENCH_PEER_DSN"]))


@app.task(name="noop")
def noop(arg: str) -> None:
    return None


@app.task(name="stamp")
def stamp(arg: str) -> None:
    with open(os.environ["BENCH_STAMPS"], "a") as out:
        out.write(f"{arg} {time.time()}\n")


_opened = False


def _open() -> None:
    global _opened
    if not _opened:
        app.open()
        _opened = True


_connection = None


def _execute(sql: str):
    """The harness's own queries, on one connection kept open (as the other adapters do)."""
    global _connection
    import psycopg

    if _connection is None:
        _connection = psycopg.connect(os.environ["BENCH_PEER_DSN"], autocommit=True)
    cursor = _connection.execute(sql)
    return cursor.fetchall() if sql.startswith("SELECT") else None


def install() -> None:
    _open()
    app.schema_manager.apply_schema()


def reset() -> None:
    _execute("TRUNCATE procrastinate_jobs, procrastinate_events, procrastinate_workers CASCADE")


def single(count: int) -> float:
    _open()
    started = time.perf_counter()
    for i in range(count):
        noop.defer(arg=str(i))
    return time.perf_counter() - started


def bulk(count: int, chunk: int) -> float:
    _open()
    started = time.perf_counter()
    for start in range(0, count, chunk):
        noop.batch_defer(*({"arg": str(i)} for i in range(start, min(start + chunk, count))))
    return time.perf_counter() - started


def enqueue_now(arg: str) -> None:
    _open()
    stamp.defer(arg=arg)


def pending() -> int:
    return _execute("SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')")[0][0]


def worker_commands() -> list[list[str]]:
    # Imported, not run as __main__: the worker's module is the one the tasks were defined in.
    return [[sys.executable, "-c", "import adapter_procrastinate; adapter_procrastinate.run_worker()"]]


def run_worker() -> None:
    import logging

    logging.basicConfig(level=logging.WARNING)
    app.run_worker(concurrency=2)
