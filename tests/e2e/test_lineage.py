"""Lineage end to end: change events and a published record landed in bronze and silver, then
traced both ways through the ledger entries of their Delta commits (docs/lineage.md)."""

import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from pyspark.sql import SparkSession
from sqlalchemy import Engine, select

from catalog.lineage import LineageStore, LineageSync
from catalog.tables import LineageCommitRow
from hub_core.database import create_database_engine
from hub_kafka.settings import KafkaSettings
from migrations import migrate
from spark_loaders.settings import LoaderSettings
from spark_loaders.silver.changes import ChangelogSpec
from spark_loaders.silver.loader import SilverLoader
from tests.support.hub_client import bearer, create_feed, unique_topic
from tests.support.loader import LoaderTopic, land_once

pytestmark = pytest.mark.e2e

SOURCE = {
    "type": "record",
    "name": "Source",
    "fields": [
        {"name": "ts_ms", "type": "long"},
        {"name": "db", "type": "string"},
        {"name": "table", "type": "string"},
        {"name": "txId", "type": ["null", "long"], "default": None},
        {"name": "lsn", "type": ["null", "long"], "default": None},
    ],
}
ROW = {
    "type": "record",
    "name": "Row",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": ["null", "string"]}],
}
ENVELOPE = {
    "type": "record",
    "name": "Envelope",
    "namespace": "shop.lineage",
    "fields": [
        {"name": "before", "type": ["null", ROW], "default": None},
        {"name": "after", "type": ["null", "Row"], "default": None},
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": "long"},
        {"name": "source", "type": SOURCE},
    ],
}


def _change(op: str, id_: int, name: str | None, *, lsn: int, tx: int) -> dict[str, Any]:
    row = {"id": id_, "name": name}
    return {
        "before": row if op in ("u", "d") else None,
        "after": None if op == "d" else row,
        "op": op,
        "ts_ms": lsn,
        "source": {"ts_ms": lsn, "db": "shop", "table": "customers", "txId": tx, "lsn": lsn},
    }


def _index(tmp_path: Path) -> Engine:
    url = f"sqlite:///{tmp_path / 'lineage.db'}"
    migrate.upgrade(url)
    return create_database_engine(url)


def _replay_last_batch(checkpoint: Path) -> None:
    """As if the loader was killed after its Delta commit and before its checkpoint's."""
    commits = sorted((checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    commits[-1].unlink()
    (commits[-1].parent / f".{commits[-1].name}.crc").unlink(missing_ok=True)


def _entries(engine: Engine, table: str) -> list[int | None]:
    """The batch ids of the table's indexed ledger entries."""
    with engine.connect() as connection:
        rows = connection.execute(
            select(LineageCommitRow.batch_id).where(LineageCommitRow.table_name == table)
        ).all()
    return sorted((r[0] for r in rows), key=lambda b: -1 if b is None else b)


def test_changes_trace_from_row_to_lsn_and_from_lsn_to_every_version_after_a_replay(
    spark: SparkSession,
    loader_topic: Any,
    tmp_path: Path,
) -> None:
    topic: LoaderTopic = loader_topic("shop", partitions=1)
    schema_id = topic.register(ENVELOPE)
    settings: LoaderSettings = topic.settings
    first = [
        _change("c", 1, "ann", lsn=100, tx=1),
        _change("c", 2, "bob", lsn=110, tx=1),
        _change("u", 1, "anne", lsn=120, tx=2),
    ]
    second = [_change("d", 2, "bob", lsn=130, tx=3), _change("c", 3, "cy", lsn=140, tx=4)]
    topic.produce(schema_id, ENVELOPE, first)
    topic.land(spark)
    topic.produce(schema_id, ENVELOPE, second)
    topic.land(spark)
    _replay_last_batch(Path(str(settings.checkpoint_dir)) / "hub-bronze")
    topic.land(spark)  # the replayed batch: Delta skips it, and its ledger entry with it

    suffix = topic.table.split(".", 1)[1]
    spec = ChangelogSpec(topic.table, f"silver.{suffix}", ("id",))
    silver = SilverLoader(spark, spec, checkpoint_dir=str(settings.checkpoint_dir))
    silver.start(available_now=True).awaitTermination()
    _replay_last_batch(Path(str(settings.checkpoint_dir)) / f"hub-silver-{suffix}")
    silver.start(available_now=True).awaitTermination()  # a no-op MERGE commits nothing

    engine = _index(tmp_path)
    LineageSync(engine, Path(str(settings.warehouse_dir)), min_interval_s=0).sync()
    store = LineageStore(engine)

    # One entry per landed batch, none for the replay.
    assert _entries(engine, topic.table) == [0, 1]
    rows = spark.table(topic.table).select("_hub_partition", "_hub_offset", "source.lsn").collect()
    assert len(rows) == 5
    for row in rows:  # every row traces back to its LSN
        (hit,) = store.bronze_holding(
            table=topic.table, partition=row["_hub_partition"], offset=row["_hub_offset"]
        )
        assert hit.lsn is not None and hit.lsn[0] <= row["lsn"] <= hit.lsn[1]
    for lsn in (100, 120, 130, 140):  # every LSN traces forward to bronze, history and current
        hits = store.bronze_by_lsn(lsn)
        assert len(hits) == 1
        tables = {v.table for v in store.downstream([(hits[0].table, hits[0].version)])}
        assert tables == {spec.history_table, spec.current_table}, lsn


def test_a_published_record_traces_to_its_bronze_row_by_its_request_id(
    spark: SparkSession,
    loader_settings: LoaderSettings,
    kafka_bootstrap: str,
    api_url: str,
    team_key: Callable[[str], str],
    tmp_path: Path,
) -> None:
    key = team_key("lineage")
    topic = unique_topic("lineage")
    visit = {"type": "record", "name": "Visit", "fields": [{"name": "page", "type": "string"}]}
    create_feed(api_url, key, topic=topic, schema=visit, owner="lineage", partitions=1)
    request_id = f"req-{uuid.uuid4().hex[:12]}"
    answer = httpx.post(
        f"{api_url}/v1/feeds/{topic}/records",
        json={"records": [{"value": {"page": "/a"}}, {"value": {"page": "/b"}}]},
        headers={**bearer(key), "X-Request-Id": request_id, "Idempotency-Key": "visit-1"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["X-Request-Id"] == request_id
    settings = loader_settings.model_copy(
        update={
            "checkpoint_dir": tmp_path / "checkpoints",
            "topic_pattern": re.escape(topic),
            "schema_refresh_seconds": 0.0,
        }
    )
    land_once(spark, settings, KafkaSettings(bootstrap_servers=kafka_bootstrap))

    table = f"bronze.{topic.replace('.', '_')}"
    landed = (
        spark.table(table)
        .select("_hub_request_id", "_hub_idempotency_key", "_hub_partition", "_hub_offset")
        .collect()
    )
    assert {(r["_hub_request_id"], r["_hub_idempotency_key"]) for r in landed} == {
        (request_id, "visit-1")
    }
    engine = _index(tmp_path)
    LineageSync(engine, Path(str(settings.warehouse_dir)), min_interval_s=0).sync()
    (hit,) = LineageStore(engine).bronze_by_request(request_id)
    offsets = [r["_hub_offset"] for r in landed]
    assert (hit.table, hit.first_offset, hit.last_offset) == (table, min(offsets), max(offsets))
