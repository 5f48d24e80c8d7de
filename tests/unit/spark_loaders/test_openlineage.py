"""OpenLineage run events of a batch: START then COMPLETE, or FAIL, to the configured transport."""

import json
from pathlib import Path
from typing import Any

import pytest

from spark_loaders.tables.openlineage import RunEvents

pytestmark = pytest.mark.unit


def _events(tmp_path: Path) -> tuple[RunEvents, Path]:
    log = tmp_path / "events.jsonl"
    config = tmp_path / "openlineage.yml"
    config.write_text(f"transport:\n  type: file\n  log_file_path: {log}\n  append: true\n")
    events = RunEvents.configured(
        config, kafka_namespace="kafka://127.0.0.1:9092", table_namespace="file:///warehouse"
    )
    return events, log


def _sent(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_batch_is_one_run_started_and_completed_with_its_topics_and_tables(
    tmp_path: Path,
) -> None:
    events, log = _events(tmp_path)

    with events.run("hub-bronze", topics=["sales.orders"], tables=["bronze.sales_orders"]):
        pass

    sent = _sent(log)
    assert [e["eventType"] for e in sent] == ["START", "COMPLETE"]
    assert sent[0]["run"]["runId"] == sent[1]["run"]["runId"]
    assert sent[1]["job"] == {"namespace": "integration-hub", "name": "hub-bronze", "facets": {}}
    assert [(d["namespace"], d["name"]) for d in sent[1]["inputs"]] == [
        ("kafka://127.0.0.1:9092", "sales.orders")
    ]
    assert [d["name"] for d in sent[1]["outputs"]] == ["bronze.sales_orders"]


def test_a_failed_batch_sends_fail_and_raises_its_error(tmp_path: Path) -> None:
    events, log = _events(tmp_path)

    with pytest.raises(ValueError, match="boom"), events.run("hub-bronze"):
        raise ValueError("boom")

    assert [e["eventType"] for e in _sent(log)] == ["START", "FAIL"]


def test_without_a_config_nothing_is_sent_and_a_transport_failure_never_fails_a_batch(
    tmp_path: Path,
) -> None:
    off = RunEvents.configured(None, kafka_namespace="k", table_namespace="t")
    broken, _ = _events(tmp_path)
    (tmp_path / "events.jsonl").mkdir()  # the file transport cannot write there

    with off.run("hub-bronze"), broken.run("hub-bronze"):
        landed = True

    assert landed and not off.enabled
