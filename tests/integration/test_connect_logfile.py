"""The log file source against a real broker: rotation, truncation, restarts and the DLQ."""

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.connect import ConnectHub, Connector, connector_file
from tests.support.kafka import read_all
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration


def _append(path: Path, *numbers: int) -> None:
    with path.open("a") as handle:
        for n in numbers:
            handle.write(json.dumps({"n": n, "msg": f"line {n}"}) + "\n")


def _json_connector(tmp_path: Path, pattern: str) -> Connector:
    return connector_file(
        tmp_path,
        kind="logfile",
        owner="web",
        source={
            "paths": [pattern],
            "format": "json",
            "poll_seconds": 0.2,
            "fields": {"n": {"type": "long", "required": True}, "msg": {"type": "string"}},
        },
    )


def _numbers(hub: ConnectHub, topic: str, expected: int) -> list[int]:
    return [value["n"] for _key, value in hub.records(topic, expected=expected)]


def _caught_up(hub: ConnectHub, name: str, path: Path) -> Callable[[], bool]:
    """True once the committed position of `path`'s current file is its end."""

    def check() -> bool:
        stat = path.stat()
        key = str(sorted({"file": f"{stat.st_dev}:{stat.st_ino}"}.items()))
        offset: dict[str, Any] | None = hub.offsets(name).get(key)
        return offset is not None and offset["offset"] == stat.st_size

    return check


def test_rotation_truncation_and_restart_lose_and_repeat_nothing(
    tmp_path: Path, connect_hub: ConnectHub
) -> None:
    connect_hub.team_key("web")
    log_file = tmp_path / "app.log"
    connector = _json_connector(tmp_path, str(log_file))
    _append(log_file, 1, 2, 3)
    with connect_hub.worker(connector.file):
        wait_until(_caught_up(connect_hub, connector.name, log_file), timeout_s=60, what="3 lines")
        # Rotation: the writer finishes the old file after the rename, then a new file starts.
        log_file.rename(tmp_path / "app.log.1")
        _append(tmp_path / "app.log.1", 4)
        _append(log_file, 5, 6)
        wait_until(_caught_up(connect_hub, connector.name, log_file), timeout_s=60, what="rotation")
        # copytruncate: the file is emptied in place and written again from its start.
        os.truncate(log_file, 0)
        _append(log_file, 7)
        wait_until(
            _caught_up(connect_hub, connector.name, log_file), timeout_s=60, what="truncation"
        )
    _append(log_file, 8, 9)
    with connect_hub.worker(connector.file):
        wait_until(_caught_up(connect_hub, connector.name, log_file), timeout_s=60, what="restart")

    assert _numbers(connect_hub, connector.topic, expected=9) == [1, 2, 3, 4, 5, 6, 7, 8, 9]


def test_a_line_in_progress_is_published_once_complete(
    tmp_path: Path, connect_hub: ConnectHub
) -> None:
    connect_hub.team_key("web")
    log_file = tmp_path / "app.log"
    connector = _json_connector(tmp_path, str(tmp_path / "*.log"))
    _append(log_file, 1)
    with log_file.open("a") as handle:
        handle.write('{"n": 2, "msg": "half')
    with connect_hub.worker(connector.file):
        wait_until(
            lambda: any(
                o["offset"] == len(json.dumps({"n": 1, "msg": "line 1"})) + 1
                for o in connect_hub.offsets(connector.name).values()
            ),
            timeout_s=60,
            what="the complete first line",
        )
        with log_file.open("a") as handle:
            handle.write(' written"}\n')
        wait_until(_caught_up(connect_hub, connector.name, log_file), timeout_s=60, what="line 2")

    records = connect_hub.records(connector.topic, expected=2)
    assert [v for _k, v in records] == [
        {"n": 1, "msg": "line 1"},
        {"n": 2, "msg": "half written"},
    ]


def test_an_unparseable_line_goes_to_the_dlq_with_its_reason(
    tmp_path: Path, connect_hub: ConnectHub
) -> None:
    connect_hub.team_key("web")
    log_file = tmp_path / "access.log"
    connector = connector_file(
        tmp_path,
        kind="logfile",
        owner="web",
        source={"paths": [str(log_file)], "format": "apache_combined", "poll_seconds": 0.2},
    )
    log_file.write_text(
        '203.0.113.9 - alice [10/Oct/2024:13:55:36 +0200] "GET /cart HTTP/1.1" 200 2326 '
        '"https://shop.example/" "Mozilla/5.0"\n'
        "this is not an access log line\n"
    )
    with connect_hub.worker(connector.file):
        wait_until(
            _caught_up(connect_hub, connector.name, log_file), timeout_s=60, what="both lines"
        )

    [(_key, value)] = connect_hub.records(connector.topic, expected=1)
    assert value["remote_host"] == "203.0.113.9"
    assert value["status"] == 200
    assert value["bytes"] == 2326
    assert value["path"] == "/cart"
    assert value["time"].isoformat() == "2024-10-10T11:55:36+00:00"
    [dead] = read_all(connect_hub.bootstrap, f"{connector.topic}.dlq", expected=1)
    headers = {k: v.decode() for k, v in dead.headers() or []}
    assert headers["hub.error.code"] == "42242"
    assert "does not match" in headers["hub.error.message"]
    assert json.loads(dead.value() or b"")["raw"] == "this is not an access log line"
