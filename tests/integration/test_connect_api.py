"""The connectors API against a `hub connect run` process: status, pause, resume, restart,
offsets, masked secrets and who may do what."""

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, insert

from tests.support.connect import write_config
from tests.support.hub_client import bearer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

SECRET_DIR = f"secret-{uuid.uuid4().hex}"


@pytest.fixture
def source_table(tmp_path: Path) -> Iterator[tuple[str, Table]]:
    folder = tmp_path / SECRET_DIR
    folder.mkdir()
    url = f"sqlite:///{folder / 'app.db'}"
    engine = create_engine(url)
    table = Table(
        "events",
        MetaData(),
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("kind", String(20), nullable=False),
    )
    table.create(engine)
    yield str(folder), table
    engine.dispose()


def _add(folder: str, table: Table, *ids: int) -> None:
    engine = create_engine(f"sqlite:///{folder}/app.db")
    with engine.begin() as conn:
        conn.execute(insert(table), [{"id": i, "kind": "click"} for i in ids])
    engine.dispose()


@pytest.fixture
def connector(
    tmp_path: Path,
    source_table: tuple[str, Table],
    api_database: str,
    kafka_bootstrap: str,
    team_key: Callable[[str], str],
) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    """A jdbc connector of team `apps` running in its own `hub connect run` process."""
    team_key("apps")
    name = f"api-{uuid.uuid4().hex[:8]}"
    config = write_config(
        tmp_path / "connector.yaml",
        {
            "name": name,
            "type": "jdbc",
            "owner": "apps",
            "topic_prefix": f"apps.{name.replace('-', '_')}",
            "source": {
                "url": "sqlite:///${APP_DB_DIR}/app.db",
                "mode": "incrementing",
                "incrementing_column": "id",
                "tables": ["events"],
                "poll_seconds": 0.2,
            },
        },
    )
    env = {
        **os.environ,
        "APP_DB_DIR": source_table[0],
        "HUB_REGISTRY_DATABASE_URL": api_database,
        "HUB_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "HUB_CONNECT_HEARTBEAT_SECONDS": "1",
    }
    log_path = tmp_path / "connect.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "hub_cli.main", "connect", "run", str(config)],
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        yield name, process, log_path
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)


def _status(api_url: str, name: str) -> dict[str, Any]:
    answer: dict[str, Any] = httpx.get(f"{api_url}/v1/connectors/{name}/status", timeout=30).json()
    return answer


def _state(api_url: str, name: str) -> str | None:
    response = httpx.get(f"{api_url}/v1/connectors/{name}/status", timeout=30)
    return response.json()["connector"]["state"] if response.status_code == 200 else None


def _offsets(api_url: str, name: str) -> list[dict[str, Any]]:
    offsets: list[dict[str, Any]] = httpx.get(
        f"{api_url}/v1/connectors/{name}/offsets", timeout=30
    ).json()["offsets"]
    return offsets


def test_status_pause_resume_restart_and_offsets_of_a_running_connector(
    api_url: str,
    admin_key: str,
    team_key: Callable[[str], str],
    connector: tuple[str, subprocess.Popen[bytes], Path],
    source_table: tuple[str, Table],
) -> None:
    name, process, log_path = connector
    folder, table = source_table
    owner_key = team_key("apps")
    _add(folder, table, 1, 2, 3)
    wait_until(lambda: _state(api_url, name) == "RUNNING", timeout_s=60, what="RUNNING")
    assert name in httpx.get(f"{api_url}/v1/connectors").json()
    status = _status(api_url, name)
    assert status["type"] == "source"
    assert [t["id"] for t in status["tasks"]] == [0]
    assert status["tasks"][0]["state"] == "RUNNING"
    assert status["tasks"][0]["worker_id"] == status["connector"]["worker_id"]
    wait_until(
        lambda: (
            _offsets(api_url, name) == [{"partition": {"table": "events"}, "offset": {"id": 3}}]
        ),
        timeout_s=60,
        what="offset 3",
    )

    described = httpx.get(f"{api_url}/v1/connectors/{name}").json()
    assert described["owner"] == "apps"
    assert described["config"]["source"]["url"] == "**********"
    assert described["config"]["source"]["mode"] == "incrementing"

    pause = f"{api_url}/v1/connectors/{name}/pause"
    assert httpx.put(pause).status_code == 401
    assert httpx.put(pause, headers=bearer(team_key("strangers"))).status_code == 403
    assert httpx.put(pause, headers=bearer(owner_key)).status_code == 202
    wait_until(lambda: _state(api_url, name) == "PAUSED", timeout_s=30, what="PAUSED")
    _add(folder, table, 4)
    resume = f"{api_url}/v1/connectors/{name}/resume"
    assert httpx.put(resume, headers=bearer(owner_key)).status_code == 202
    wait_until(lambda: _state(api_url, name) == "RUNNING", timeout_s=30, what="RUNNING again")
    wait_until(
        lambda: _offsets(api_url, name)[0]["offset"] == {"id": 4}, timeout_s=60, what="offset 4"
    )

    restart = f"{api_url}/v1/connectors/{name}/restart"
    assert httpx.post(restart, headers=bearer(team_key("strangers"))).status_code == 403
    assert httpx.post(restart, headers=bearer(admin_key)).status_code == 202
    wait_until(lambda: b"restarting" in log_path.read_bytes(), timeout_s=30, what="a restart")
    _add(folder, table, 5)
    wait_until(
        lambda: _offsets(api_url, name)[0]["offset"] == {"id": 5}, timeout_s=60, what="offset 5"
    )
    assert _state(api_url, name) == "RUNNING"

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    # What a worker reports reaches the API's cache of the status topic a moment later.
    wait_until(lambda: _state(api_url, name) == "UNASSIGNED", timeout_s=30, what="UNASSIGNED")
    logs = log_path.read_text()
    assert SECRET_DIR not in logs
    assert SECRET_DIR not in httpx.get(f"{api_url}/v1/connectors/{name}").text


def test_an_unknown_connector_is_a_coded_404(api_url: str, admin_key: str) -> None:
    for response in (
        httpx.get(f"{api_url}/v1/connectors/nope/status"),
        httpx.get(f"{api_url}/v1/connectors/nope/offsets"),
        httpx.put(f"{api_url}/v1/connectors/nope/pause", headers=bearer(admin_key)),
    ):
        assert response.status_code == 404
        assert response.json()["error_code"] == 40430
        assert "nope" in response.json()["message"]


def test_a_killed_connector_is_reported_unassigned_after_missed_heartbeats(
    api_url: str,
    admin_key: str,
    connector: tuple[str, subprocess.Popen[bytes], Path],
) -> None:
    name, process, _log_path = connector
    wait_until(lambda: _state(api_url, name) == "RUNNING", timeout_s=60, what="RUNNING")
    process.kill()
    process.wait(timeout=30)
    wait_until(lambda: _state(api_url, name) == "UNASSIGNED", timeout_s=60, what="UNASSIGNED")
    [task] = httpx.get(
        f"{api_url}/v1/connectors/{name}/status", headers=bearer(admin_key), timeout=30
    ).json()["tasks"]
    assert task["state"] == "UNASSIGNED"
    assert "no status from worker" in task["trace"]


def _state_consumers(api_url: str) -> float:
    """The API's count of Kafka consumers built to read connector state (from /metrics)."""
    for line in httpx.get(f"{api_url}/metrics", timeout=30).text.splitlines():
        if line.startswith("hub_connector_state_consumers "):
            return float(line.split()[1])
    raise AssertionError("hub_connector_state_consumers is not in /metrics")


def test_connector_reads_come_from_the_cache_and_a_pause_is_read_back_at_once(
    api_url: str,
    team_key: Callable[[str], str],
    connector: tuple[str, subprocess.Popen[bytes], Path],
) -> None:
    name, _process, _log_path = connector
    owner = bearer(team_key("apps"))
    wait_until(lambda: _state(api_url, name) == "RUNNING", timeout_s=60, what="RUNNING")
    before = _state_consumers(api_url)

    for _ in range(10):
        assert name in httpx.get(f"{api_url}/v1/connectors", timeout=30).json()
        assert _status(api_url, name)["connector"]["state"] == "RUNNING"
        assert _offsets(api_url, name) is not None
    paused = httpx.put(f"{api_url}/v1/connectors/{name}/pause", headers=owner, timeout=30)
    after_pause = httpx.get(f"{api_url}/v1/connectors/{name}", timeout=30).json()
    resumed = httpx.put(f"{api_url}/v1/connectors/{name}/resume", headers=owner, timeout=30)
    after_resume = httpx.get(f"{api_url}/v1/connectors/{name}", timeout=30).json()

    assert before >= 1  # the one reader of this API worker
    assert _state_consumers(api_url) == before  # thirty reads, no new consumer
    assert paused.status_code == 202
    assert after_pause["target_state"] == "PAUSED"  # no wait: the write is read back
    assert resumed.status_code == 202
    assert after_resume["target_state"] == "STARTED"


def test_failure_traces_are_shown_to_the_owner_team_and_admins_only(
    api_url: str,
    admin_key: str,
    team_key: Callable[[str], str],
    connector: tuple[str, subprocess.Popen[bytes], Path],
    source_table: tuple[str, Table],
) -> None:
    name, _process, _log_path = connector
    folder, _table = source_table
    owner, stranger = bearer(team_key("apps")), bearer(team_key("strangers"))
    url = f"{api_url}/v1/connectors/{name}/status"
    wait_until(lambda: _state(api_url, name) == "RUNNING", timeout_s=60, what="RUNNING")
    engine = create_engine(f"sqlite:///{folder}/app.db")
    with engine.begin() as conn:  # the source table goes away: the task fails or retries
        conn.exec_driver_sql("ALTER TABLE events RENAME TO gone")
    engine.dispose()
    wait_until(
        lambda: "trace" in httpx.get(url, headers=owner, timeout=30).json()["tasks"][0],
        timeout_s=60,
        what="a trace",
    )

    [owners_task] = httpx.get(url, headers=owner, timeout=30).json()["tasks"]
    [admins_task] = httpx.get(url, headers=bearer(admin_key), timeout=30).json()["tasks"]
    strangers = httpx.get(url, headers=stranger, timeout=30).json()
    anonymous = httpx.get(url, timeout=30).json()

    assert "events" in owners_task["trace"]
    assert "trace" in admins_task
    for answer in (strangers, anonymous):
        [task] = answer["tasks"]
        assert "trace" not in task
        assert "last_error" not in task.get("retry", {})
        assert task["state"] == owners_task["state"]
        assert "apps" in task["message"]
        assert "events" not in str(answer)
