"""`hub connect run`'s health endpoints, as a Kubernetes probe sees them: alive while the
worker runs; ready while its connectors run, and not once one has FAILED, with its name."""

from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine

from tests.support.connect import ConnectHub, connector_file, serving_worker
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


def _answer(url: str) -> tuple[int, dict[str, str]] | None:
    try:
        response = httpx.get(url, timeout=5)
    except httpx.ConnectError:
        return None  # not serving yet
    return response.status_code, response.json()


def _says_failed(url: str) -> bool:
    answer = _answer(url)
    return answer is not None and answer[0] == 503 and "FAILED" in answer[1].get("reason", "")


def test_ready_while_connectors_run_and_not_once_one_failed(
    tmp_path: Path, connect_hub: ConnectHub
) -> None:
    connect_hub.team_key("erp")
    lines = tmp_path / "app.log"
    lines.write_text('{"n": 1}\n')
    running = connector_file(tmp_path, kind="logfile", owner="erp", source={
        "paths": [str(lines)], "format": "json", "poll_seconds": 0.2,
        "fields": {"n": {"type": "long", "required": True}},
    })  # fmt: skip
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    create_engine(empty).connect().close()
    failing = connector_file(tmp_path, kind="jdbc", owner="erp", prefixed=True, source={
        "url": empty, "mode": "incrementing", "tables": ["orders"],
        "incrementing_column": "id", "poll_seconds": 0.2,
    })  # fmt: skip

    with serving_worker(connect_hub, [running.file], tmp_path / "one.log") as url:
        wait_until(lambda: _answer(f"{url}/readyz") == (200, {"status": "ok"}),
                   timeout_s=60, what="the worker to be ready")  # fmt: skip
        assert _answer(f"{url}/healthz") == (200, {"status": "ok"})

    with serving_worker(connect_hub, [running.file, failing.file], tmp_path / "two.log") as url:
        wait_until(lambda: _says_failed(f"{url}/readyz"), timeout_s=60,
                   what="the failed connector in /readyz")  # fmt: skip
        assert _answer(f"{url}/readyz") == (
            503, {"status": "unavailable", "reason": f"FAILED: {failing.name}"}
        )  # fmt: skip
        assert _answer(f"{url}/healthz") == (200, {"status": "ok"})  # still alive
