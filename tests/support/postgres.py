"""A throw-away PostgreSQL cluster for tests, from the Debian package's binaries."""

import getpass
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.ports import free_port


class PostgresUnavailable(RuntimeError):
    """PostgreSQL binaries are missing or the cluster did not start; the message says why."""


def _bin_dir() -> Path:
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), reverse=True)
    if not candidates:
        raise PostgresUnavailable(
            "PostgreSQL server binaries not found under /usr/lib/postgresql. "
            "Run `make postgres` (installs the Debian package)."
        )
    return candidates[0].parent


@dataclass
class TempPostgres:
    """initdb + pg_ctl in a temporary directory, on a free loopback port, trust auth."""

    root: Path
    port: int = 0

    def __post_init__(self) -> None:
        self._bin = _bin_dir()
        self.data = self.root / "data"
        self.port = self.port or free_port()
        # PostgreSQL refuses to run as root; the Debian package creates a `postgres` user.
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.user = "postgres" if os.geteuid() == 0 else getpass.getuser()

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/postgres"

    def database_url(self, name: str) -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{name}"

    def start(self) -> None:
        """Create the cluster on first use, then start its server (again, after `stop`)."""
        self.root.mkdir(parents=True, exist_ok=True)
        if self._as:
            shutil.chown(self.root, "postgres", "postgres")
        if not (self.data / "PG_VERSION").exists():
            self._run("initdb", "-D", str(self.data), "-U", self.user, "--auth=trust", "-E", "UTF8")
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            "-c wal_level=logical -c max_wal_senders=10 -c max_replication_slots=10 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.root / "postgres.log"),
            "-w",
            "-t",
            "60",
            "start",
        )

    def create_database(self, name: str) -> str:
        self._psql(f'CREATE DATABASE "{name}"')
        return self.database_url(name)

    def stop(self) -> None:
        if self.data.exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop", check=False)

    def _psql(self, sql: str) -> None:
        self._run(
            "psql",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            self.user,
            "-d",
            "postgres",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            sql,
        )

    def _run(self, tool: str, *args: str, check: bool = True) -> None:
        result = subprocess.run(
            [*self._as, str(self._bin / tool), *args], capture_output=True, text=True, check=False
        )
        if check and result.returncode != 0:
            log_file = self.root / "postgres.log"
            server_log = log_file.read_text()[-2000:] if log_file.exists() else ""
            raise PostgresUnavailable(
                f"{tool} failed (exit {result.returncode}): {result.stderr.strip()}\n{server_log}"
            )
