"""The analysts' server as tests run it: `hub analyst serve` in its own process, and a client.

The server is the process the hub's users run, on the same metastore and warehouse as the
test's loader; the client logs in as JDBC and beeline users do (impyla, PLAIN login with a hub
API key as the password).
"""

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from impala.dbapi import connect
from impala.error import HiveServer2Error, OperationalError

from spark_loaders.settings import LoaderSettings
from tests.support.ports import free_port
from tests.support.waiting import wait_until

# A statement refused before it runs fails the ExecuteStatement call itself (impyla's
# HiveServer2Error); one refused while it runs fails its operation (OperationalError).
REFUSED = (HiveServer2Error, OperationalError)


def analyst_env(settings: LoaderSettings) -> dict[str, str]:
    """The environment of a process on the same metastore and warehouse as the loader."""
    return {
        **os.environ,
        "HUB_LOADER_MASTER": "local[1]",
        "HUB_LOADER_DRIVER_MEMORY": "512m",
        "HUB_LOADER_SHUFFLE_PARTITIONS": "1",
        "HUB_LOADER_WAREHOUSE_DIR": str(settings.warehouse_dir),
        "HUB_LOADER_METASTORE_DIR": str(settings.metastore_dir),
        "HUB_LOADER_METASTORE_PORT": str(settings.metastore_port),
        "HUB_LOADER_METASTORE_JARS_DIR": str(settings.metastore_jars_dir),
        "HUB_LOADER_JARS_DIR": str(settings.jars_dir),
        # An embedded metastore database (benchmarks) instead of the metastore server.
        **({"HUB_LOADER_METASTORE_URL": settings.metastore_url} if settings.metastore_url else {}),
    }


@dataclass
class AnalystServer:
    """A running `hub analyst serve`: its port and its log (stdout and stderr)."""

    port: int
    log_path: Path


@contextmanager
def serve_analyst(
    settings: LoaderSettings, *, api_url: str, log_path: Path, env: Mapping[str, str]
) -> Iterator[AnalystServer]:
    """`hub analyst serve` on a free port, checking keys with the API at `api_url`, until the
    block ends; `env` adds settings. The server must stop cleanly on SIGTERM."""
    port = free_port()
    with log_path.open("wb") as log_file:
        server = subprocess.Popen(
            [sys.executable, "-m", "hub_cli.main", "analyst", "serve", "--port", str(port)],
            env={**analyst_env(settings), "HUB_ANALYST_API_URL": api_url, **env},
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        wait_until(
            lambda: server.poll() is not None or "Thrift server is ready" in log_path.read_text(),
            timeout_s=300,
            what=f"`hub analyst serve` to accept connections (log: {log_path})",
        )
        assert server.poll() is None, log_path.read_text()[-3000:]
        yield AnalystServer(port, log_path)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    assert "stopping the Thrift server" in log_path.read_text()


def thrift_rows(
    port: int,
    statement: str,
    *,
    key: str,
    user: str = "analysts",
    settings: dict[str, str] | None = None,
    fetch: bool = True,
) -> list[tuple[Any, ...]]:
    """Run `statement` as a client would, logging in with the API key `key` as the password.

    `settings` go into the session's handshake (OpenSession), as JDBC URL settings and beeline's
    `--hiveconf` do. Without `fetch`, the statement only runs (impyla cannot fetch the empty
    result of a command such as CREATE TEMPORARY VIEW).
    """
    connection = connect(
        host="127.0.0.1", port=port, auth_mechanism="PLAIN", user=user, password=key
    )
    try:
        cursor = connection.cursor(configuration=settings)
        try:
            cursor.execute(statement)
            rows: list[tuple[Any, ...]] = cursor.fetchall() if fetch else []
        finally:
            cursor.close()
        return rows
    finally:
        connection.close()
