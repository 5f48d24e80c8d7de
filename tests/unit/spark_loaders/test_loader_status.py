"""The loader's `/status`, `/plan` and `/replay` on its health port: refused without its control
token, off without the setting, and `/status` built from the tables' Delta logs."""

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from hub_core.health import HealthServer
from spark_loaders.control.status import ROUTES, ControlRoutes, LoaderStatus
from spark_loaders.runtime.metrics import LoaderMetrics
from spark_loaders.settings import LoaderSettings
from spark_loaders.tables.delta_log import MIXED_REASONS, TableLog

pytestmark = pytest.mark.unit

TOKEN = "the-loaders-control-token"


def _commit(table: Path, version: int, *actions: dict[str, Any], at_ms: int = 1_700_000_000_000):
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    lines = [{"commitInfo": {"timestamp": at_ms + version, "operation": "WRITE"}}, *actions]
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in lines) + "\n")


def _add(path: str, rows: int, reason: str | None = None, other: str | None = None) -> dict:
    stats: dict[str, Any] = {"numRecords": rows}
    if reason is not None:
        stats["minValues"] = {"_hub_reason_code": reason}
        stats["maxValues"] = {"_hub_reason_code": other or reason}
    return {"add": {"path": path, "stats": json.dumps(stats)}}


def test_the_log_gives_rows_version_and_commit_time_and_reads_only_new_commits(
    tmp_path: Path,
) -> None:
    table = tmp_path / "t"
    followed = TableLog(table)
    assert followed.refresh() is None  # no table yet

    _commit(table, 0, _add("a.parquet", 3), _add("b.parquet", 2))
    facts = followed.refresh()
    assert facts is not None and (facts.rows, facts.version, facts.files) == (5, 0, 2)
    assert facts.committed_ms == 1_700_000_000_000

    # Compaction: two files out, one in; the first commit is not read again.
    (table / "_delta_log" / f"{0:020d}.json").write_text("not json: it must not be re-read")
    _commit(table, 1, {"remove": {"path": "a.parquet"}}, {"remove": {"path": "b.parquet"}},
            _add("c.parquet", 5))  # fmt: skip
    facts = followed.refresh()
    assert facts is not None and (facts.rows, facts.version, facts.files) == (5, 1, 1)
    assert facts.committed_ms == 1_700_000_000_001


def test_commits_cleaned_up_before_a_checkpoint_leave_the_rows_unknown_not_guessed(
    tmp_path: Path,
) -> None:
    table = tmp_path / "t"
    _commit(table, 11, _add("a.parquet", 3))  # versions 0..10 are only in a checkpoint
    (table / "_delta_log" / f"{10:020d}.checkpoint.parquet").write_bytes(b"PAR1")

    facts = TableLog(table).refresh()

    assert facts is not None and facts.version == 11 and facts.rows is None


def test_quarantine_files_count_their_records_by_reason_code(tmp_path: Path) -> None:
    table = tmp_path / "q"
    _commit(table, 0, _add("a", 2, "SCHEMA_UNRESOLVABLE"), _add("b", 1, "PAYLOAD_UNDECODABLE"))
    _commit(table, 1, _add("c", 4, "PAYLOAD_UNDECODABLE"), _add("d", 1, "A", "B"))

    facts = TableLog(table).refresh()

    assert facts is not None
    assert facts.by_reason == {"SCHEMA_UNRESOLVABLE": 2, "PAYLOAD_UNDECODABLE": 5, MIXED_REASONS: 1}


def _settings(tmp_path: Path, token: str | None = TOKEN) -> LoaderSettings:
    return LoaderSettings(
        warehouse_dir=tmp_path / "warehouse",
        checkpoint_dir=tmp_path / "checkpoints",
        control_token=SecretStr(token) if token else None,
    )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    """The control routes on a health server with a warehouse of two tables; replays are
    recorded, not run (they need Spark)."""
    warehouse = tmp_path / "warehouse"
    _commit(warehouse / "bronze.db" / "shop_orders", 0, _add("a", 3), at_ms=int(time.time() * 1000))
    _commit(warehouse / "quarantine.db" / "shop_orders", 0, _add("q", 2, "SCHEMA_UNRESOLVABLE"))
    settings = _settings(tmp_path)
    metrics = LoaderMetrics()
    metrics.follow([{"name": "bronze", "sources": [{
        "latestOffset": {"shop.orders": {"0": 10, "1": 5}},
        "endOffset": {"shop.orders": {"0": 7, "1": 5}}}]}])  # fmt: skip
    status = LoaderStatus(settings, metrics=metrics)
    status.refresh()
    replayed: list[str] = []

    def replay(topic: str) -> dict[str, Any]:
        replayed.append(topic)
        return {"topic": topic, "examined": 2, "landed": 2, "still_failing": {}, "message": "ok"}

    health = HealthServer("127.0.0.1", 0, name="loader")
    health.mount(ROUTES, ControlRoutes(settings, status, replay=replay))
    with health:
        yield f"http://127.0.0.1:{health.port}", replayed


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({}, 401, 40101),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, 401, 40101),
        ({"Authorization": "Bearer not-the-token"}, 403, 40301),
        ({"Authorization": f"Bearer {TOKEN}x"}, 403, 40301),
    ],
    ids=["no-token", "basic-auth", "wrong-token", "longer-token"],
)
def test_every_control_route_refuses_a_missing_or_wrong_token(
    served: tuple[str, list[str]], headers: dict[str, str], status: int, code: int
) -> None:
    url, replayed = served
    for method, path in (("GET", "/status"), ("GET", "/plan?topic=shop.orders"),
                         ("POST", "/replay?topic=shop.orders")):  # fmt: skip
        answer = httpx.request(method, url + path, headers=headers, timeout=5)
        assert (answer.status_code, answer.json()["error_code"]) == (status, code), path
        assert TOKEN not in answer.text
    assert replayed == []


def test_status_lists_tables_with_rows_and_freshness_and_feeds_with_lag_and_quarantine(
    served: tuple[str, list[str]],
) -> None:
    url, _ = served
    answer = httpx.get(f"{url}/status", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5)

    assert answer.status_code == 200
    body = answer.json()
    tables = {(t["layer"], t["table"]): t for t in body["tables"]}
    bronze = tables[("bronze", "shop_orders")]
    assert (bronze["rows"], bronze["version"]) == (3, 0)
    assert 0 <= bronze["freshness_s"] < 60
    (feed,) = body["feeds"]
    assert feed["topic"] == "shop.orders" and feed["lag_records"] == 3
    assert feed["quarantined"] == 2
    assert feed["quarantined_by_reason"] == {"SCHEMA_UNRESOLVABLE": 2}
    # The probes still answer next to the mounted routes.
    assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200


def test_replay_with_the_token_replays_the_topic_and_refuses_a_name_that_is_no_topic(
    served: tuple[str, list[str]],
) -> None:
    url, replayed = served
    auth = {"Authorization": f"Bearer {TOKEN}"}

    ok = httpx.post(f"{url}/replay?topic=shop.orders", headers=auth, timeout=5)
    bad = httpx.post(f"{url}/replay?topic=../etc", headers=auth, timeout=5)
    read = httpx.get(f"{url}/replay?topic=shop.orders", headers=auth, timeout=5)

    assert ok.status_code == 200 and ok.json()["landed"] == 2
    assert bad.status_code == 400 and "Invalid topic name" in bad.json()["message"]
    assert read.status_code == 400  # a GET never replays
    assert replayed == ["shop.orders"]


def test_without_the_setting_the_control_routes_answer_404_with_their_code(
    tmp_path: Path,
) -> None:
    settings = _settings(tmp_path, token=None)
    health = HealthServer("127.0.0.1", 0, name="loader")
    health.mount(ROUTES, ControlRoutes(settings, LoaderStatus(settings)))
    with health:
        answer = httpx.get(
            f"http://127.0.0.1:{health.port}/status",
            headers={"Authorization": "Bearer anything"},
            timeout=5,
        )
    assert answer.status_code == 404
    assert answer.json()["error_code"] == 40451
    assert "HUB_LOADER_CONTROL_TOKEN" in answer.json()["message"]
