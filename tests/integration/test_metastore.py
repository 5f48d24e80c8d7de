"""`hub metastore start|status|stop`: the local metastore server as an operator runs it."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import JARS
from tests.support.ports import free_port

pytestmark = pytest.mark.integration


def _hub(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hub_cli.main", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_metastore_commands_start_report_and_stop_the_local_server(tmp_path: Path) -> None:
    port = free_port()
    env = {
        "HUB_LOADER_METASTORE_DIR": str(tmp_path / "metastore"),
        "HUB_LOADER_METASTORE_PORT": str(port),
        "HUB_LOADER_METASTORE_JARS_DIR": str(JARS / "metastore"),
    }
    stopped = _hub(env, "metastore", "status")
    assert stopped.returncode == 1
    assert "not running" in stopped.stdout

    started = _hub(env, "metastore", "start")
    try:
        assert started.returncode == 0, started.stderr
        assert f"127.0.0.1:{port}" in started.stdout
        again = _hub(env, "metastore", "start")  # a second start finds it running
        assert again.returncode == 0, again.stderr
        status = _hub(env, "metastore", "status")
        assert status.returncode == 0
        assert f"on 127.0.0.1:{port}: ready" in status.stdout
    finally:
        stop = _hub(env, "metastore", "stop")
    assert stop.stdout.strip() == "Metastore server stopped"
    assert "Apache Derby Network Server" in (tmp_path / "metastore" / "server.log").read_text()


def test_a_port_taken_by_another_program_is_named_with_the_setting(tmp_path: Path) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        result = _hub(
            {
                "HUB_LOADER_METASTORE_DIR": str(tmp_path / "metastore"),
                "HUB_LOADER_METASTORE_PORT": str(port),
                "HUB_LOADER_METASTORE_JARS_DIR": str(JARS / "metastore"),
            },
            "metastore",
            "start",
        )
    assert result.returncode == 2
    assert f"Port {port} is taken" in result.stderr
    assert "HUB_LOADER_METASTORE_PORT" in result.stderr
    assert "error 50010" in result.stderr
