"""pgqueuer in the side-by-side benchmark (see harness.py), with asyncpg as its docs show first.

Its worker runs at its defaults: jobs as asyncio tasks, as many at a time as it fetches.
"""

import asyncio
import os
import sys
import time
from contextlib import asynccontextmanager

import asyncpg
from pgqueuer.db import AsyncpgDriver
from pgqueuer.queries import Queries

DSN = os.environ["BENCH_PEER_DSN"]
_loop = asyncio.new_event_loop()
_queries = None


def _run(coroutine):
    return _loop.run_until_complete(coroutine)


def _q() -> Queries:
    global _queries
    if _queries is None:
        _queries = Queries(AsyncpgDriver(_run(asyncpg.connect(DSN))))
    return _queries


def install() -> None:
    _run(_q().install())


def reset() -> None:
    _run(_q().driver.execute("TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics"))


def single(count: int) -> float:
    async def loop():
        started = time.perf_counter()
        for i in range(count):
            await _q().enqueue("noop", str(i).encode())
        return time.perf_counter() - started

    return _run(loop())


def bulk(count: int, chunk: int) -> float:
    async def loop():
        started = time.perf_counter()
        for start in range(0, count, chunk):
            size = min(chunk, count - start)
            await _q().enqueue(
                ["noop"] * size, [str(i).encode() for i in range(start, start + size)], [0] * size
            )
        return time.perf_counter() - started

    return _run(loop())


def enqueue_now(arg: str) -> None:
    _run(_q().enqueue("stamp", arg.encode()))


def pending() -> int:
    return _run(_q().driver.fetch("SELECT count(*) AS n FROM pgqueuer WHERE status IN ('queued', 'picked')"))[
        0
    ]["n"]


def worker_commands() -> list[list[str]]:
    # Imported, not run as __main__: the worker's module is the one the tasks were defined in.
    return [[sys.executable, "-c", "import adapter_pgqueuer; adapter_pgqueuer.run_worker()"]]


@asynccontextmanager
async def _factory():
    from pgqueuer import PgQueuer

    connection = await asyncpg.connect(DSN)
    try:
        pgq = PgQueuer.from_asyncpg_connection(connection)

        @pgq.entrypoint("noop")
        async def noop(job) -> None:
            return None

        @pgq.entrypoint("stamp")
        async def stamp(job) -> None:
            with open(os.environ["BENCH_STAMPS"], "a") as out:
                out.write(f"{job.payload.decode()} {time.time()}\n")

        yield pgq
    finally:
        await connection.close()


def run_worker() -> None:
    import pgqueuer

    asyncio.run(pgqueuer.run(_factory))
