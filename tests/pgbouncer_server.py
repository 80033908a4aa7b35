"""A real PgBouncer (tests, bench/fleet.py): its own process, ini file and port; stopped by its starter."""

import getpass
import os
import shutil
import socket
import subprocess
from pathlib import Path

from tests.server_process import ServerProcess, free_port

#: The tests that start a PgBouncer run only when this variable is 1 (.ci/run sets it).
OPT_IN = "DBJOBS_TEST_PGBOUNCER"
#: Its database entries: the test database in each pool mode.
MODES = ("transaction", "session")


class PgBouncer(ServerProcess):
    """``pgbouncer`` (Debian's package) in front of the PostgreSQL database of `server` (a Django
    settings dict), on a free local port: by default database ``dbjobs_<mode>`` for each of
    MODES; else `databases`, {name: pool mode}. Up to `pool_size` server connections each."""

    def __init__(
        self, server: dict, directory: Path, databases: dict[str, str] | None = None, pool_size: int = 40
    ):
        binary = shutil.which("pgbouncer") or shutil.which("/usr/sbin/pgbouncer")
        assert binary, "PgBouncer is not installed: apt-get install -y pgbouncer"
        self.server = server
        self.port = free_port()
        self.user = user = server.get("USER") or getpass.getuser()
        users = directory / "users.txt"
        users.write_text(f'"{user}" "{server.get("PASSWORD") or ""}"\n')
        host, port = server.get("HOST") or "127.0.0.1", server.get("PORT") or 5432
        target = f"host={host} port={port} dbname={server['NAME']}"
        entries = databases or {f"dbjobs_{mode}": mode for mode in MODES}
        lines = "\n".join(f"{name} = {target} pool_mode={mode}" for name, mode in entries.items())
        config = directory / "pgbouncer.ini"
        # server_reset_query stays the default (DISCARD ALL, run in session mode only).
        config.write_text(
            f"[databases]\n{lines}\n\n[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {users}\npool_mode = transaction\n"
            f"max_client_conn = 500\ndefault_pool_size = {pool_size}\n"
            # SHOW POOLS, SHOW STATS on its console (database "pgbouncer"): bench/fleet.py; PAUSE,
            # RESUME and SET (admin()): tests/test_pgbouncer.py.
            f"stats_users = {user}\nadmin_users = {user}\n"
            # Django's psycopg sends none of these, other clients may.
            "ignore_startup_parameters = extra_float_digits,options\n"
        )
        # It refuses to run as root: it reads its files first, then becomes `nobody`.
        as_user = ["-u", "nobody"] if os.geteuid() == 0 else []
        super().__init__([binary, *as_user, str(config)], directory / "pgbouncer.log")
        self.wait_ready(self._ready, 20, "PgBouncer")

    def database(self, mode: str) -> dict:
        """The keys of a Django settings dict that go through it in `mode`, one of MODES: in
        transaction mode without server-side cursors, as Django documents, which turns off
        django-dbjobs' prepared statements too; "transaction-prepared" leaves them on."""
        return {
            "HOST": "127.0.0.1",
            "PORT": self.port,
            "NAME": f"dbjobs_{mode.removesuffix('-prepared')}",
            "DISABLE_SERVER_SIDE_CURSORS": mode == "transaction",
        }

    def admin(self, command: str) -> None:
        """Run `command` on its admin console (PAUSE, RESUME, SET...), with psql: the console
        speaks the simple query protocol only."""
        subprocess.run(
            ["psql", "-X", "-q", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, "-d", "pgbouncer"]
            + ["-c", command],
            check=True,
            capture_output=True,
            timeout=60,
        )

    def _ready(self) -> bool:
        assert self.process.poll() is None, f"PgBouncer exited:\n{self.output()}"
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True
