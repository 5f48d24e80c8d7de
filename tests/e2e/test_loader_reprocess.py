"""Reprocessing: a bronze table rebuilt from Kafka into a new location and swapped in by the
running loader, which keeps landing records exactly once afterwards, each traced to its commit
there; silver and gold read the rebuilt table, and lineage keeps the two locations apart."""

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from sqlalchemy import Engine

from catalog.lineage import LineageStore, LineageSync
from hub_core.database import create_database_engine
from migrations import migrate
from spark_loaders.bronze.reprocess import SwapRequests, build
from spark_loaders.control.row_lookup import row_position
from spark_loaders.silver.changes import ChangelogSpec
from spark_loaders.silver.loader import SilverLoader
from spark_loaders.tables.lineage import delta_table_id
from spark_loaders.warehouse.build import WarehouseBuilder
from spark_loaders.warehouse.model import parse_model
from tests.e2e.test_lineage import ENVELOPE, _change
from tests.support.loader import LoaderTopic

pytestmark = pytest.mark.e2e

SCHEMA = {
    "type": "record",
    "name": "Reading",
    "fields": [{"name": "n", "type": "int"}],
}


def test_rebuild_swaps_in_atomically_and_keeps_what_the_stream_landed_meanwhile(
    spark: SparkSession, loader_topic: Callable[..., LoaderTopic], tmp_path: Path
) -> None:
    rebuilt = loader_topic("rebuild")
    table, settings = rebuilt.table, rebuilt.settings
    schema_id = rebuilt.register(SCHEMA)

    def publish(numbers: range) -> None:
        rebuilt.produce(schema_id, SCHEMA, [{"n": n} for n in numbers])

    def land() -> None:
        rebuilt.land(spark)

    def location() -> str:
        return str(spark.sql(f"DESCRIBE DETAIL {table}").first()["location"])  # type: ignore[index]

    publish(range(0, 40))
    land()
    old = location()

    result = build(spark, settings, rebuilt.kafka, rebuilt.name)
    assert result.request.rows == 40
    assert location() == old  # the old table keeps serving while the rebuild waits

    # Records the stream lands into the old location after the rebuild read its end offsets.
    swaps = SwapRequests(settings.checkpoint_dir)
    result.request_file.unlink()
    publish(range(40, 50))
    land()
    assert spark.table(table).count() == 50 and location() == old
    swaps.put(result.request)

    publish(range(50, 55))
    land()  # the loader swaps at its next batch, copies 40..49 over, lands 50..54
    assert location().rstrip("/").endswith(result.request.location)
    numbers = sorted(r["n"] for r in spark.table(table).collect())
    assert numbers == list(range(55))
    assert spark.read.format("delta").load(old).count() == 50  # the old location is untouched

    publish(range(55, 60))
    land()
    rows = spark.table(table).select("n", "_hub_partition", "_hub_offset").collect()
    assert sorted(r["n"] for r in rows) == list(range(60))
    assert len({(r["_hub_partition"], r["_hub_offset"]) for r in rows}) == 60
    assert swaps.list() == []  # settled once a batch after the swap ran

    # Lineage follows the table to its rebuild: each row is held by one commit there, the
    # rebuild's for what it read from Kafka, the copy's for what the stream landed meanwhile.
    url = f"sqlite:///{tmp_path / 'lineage.db'}"
    migrate.upgrade(url)
    engine = create_database_engine(url)
    sync = LineageSync(engine, Path(str(settings.warehouse_dir)), min_interval_s=0)
    sync.sync()
    store = LineageStore(engine)
    assert sync.tables()[table] == str(Path(result.request.location))
    copied = set()
    for row in rows:
        partition, offset = row["_hub_partition"], row["_hub_offset"]
        hits = store.bronze_holding(table=table, partition=partition, offset=offset)
        assert len(hits) == 1, (row["n"], hits)
        if offset <= result.request.end_offsets[str(partition)]:
            assert hits[0].version == 0, row["n"]
        elif row["n"] < 50:
            copied.add(hits[0].version)
    assert len(copied) == 1 and copied != {0}


def _index(tmp_path: Path) -> Engine:
    url = f"sqlite:///{tmp_path / 'lineage.db'}"
    migrate.upgrade(url)
    return create_database_engine(url)


def test_silver_follows_a_swapped_bronze_table_and_lineage_keeps_both_locations_apart(
    spark: SparkSession, loader_topic: Callable[..., LoaderTopic], tmp_path: Path
) -> None:
    topic = loader_topic("reswap", partitions=1)
    schema_id = topic.register(ENVELOPE)
    settings = topic.settings
    topic.produce(schema_id, ENVELOPE, [_change("c", 1, "ann", lsn=100, tx=1),
                                        _change("c", 2, "bob", lsn=110, tx=2)])  # fmt: skip
    topic.land(spark)
    spec = ChangelogSpec(topic.table, topic.table.replace("bronze.", "silver.", 1), ("id",))
    SilverLoader(spark, spec, checkpoint_dir=str(settings.checkpoint_dir)).start(
        available_now=True
    ).awaitTermination()
    old_id = delta_table_id(spark, topic.table)

    # Rebuilt and swapped in by the loader's next batch, which lands one more change.
    assert build(spark, settings, topic.kafka, topic.name).request.rows == 2
    topic.produce(schema_id, ENVELOPE, [_change("u", 1, "anne", lsn=120, tx=3)])
    topic.land(spark)
    new_id = delta_table_id(spark, topic.table)
    assert new_id != old_id

    # Silver, started again as the loader does after its stream stopped, reads the rebuilt
    # table from its start from a checkpoint of its own, and holds each change once.
    silver = SilverLoader(spark, spec, checkpoint_dir=str(settings.checkpoint_dir))
    query = silver.start(available_now=True)
    query.awaitTermination()
    assert query.exception() is None
    history = spark.table(spec.history_table).select("id", "_hub_lsn").collect()
    assert sorted((r["id"], r["_hub_lsn"]) for r in history) == [(1, 100), (1, 120), (2, 110)]
    current = spark.table(spec.current_table).select("id", "name").collect()
    assert sorted((r["id"], r["name"]) for r in current) == [(1, "anne"), (2, "bob")]
    assert (
        settings.checkpoint_dir / f"hub-silver-{topic.table.split('.', 1)[1]}-{new_id}"
    ).is_dir()

    engine = _index(tmp_path)
    LineageSync(engine, Path(str(settings.warehouse_dir)), min_interval_s=0).sync()
    store = LineageStore(engine)
    old = f"{topic.table}@original"  # where the table was created, replaced by the swap
    # LSN 100 is held by the old location's batch, read by the first silver versions, and by
    # the rebuild (version 0 of the new location).
    hits = store.bronze_by_lsn(100)
    assert {(h.table, h.version) for h in hits if h.topic == topic.name} == {
        (old, 0),
        (topic.table, 0),
    }
    first_silver = store.downstream([(old, 0)])
    assert {v.table for v in first_silver} == {spec.history_table, spec.current_table}
    # LSN 120 landed at the new location only, and leads to the silver versions after it,
    # not to those that read the old location's version of the same number.
    (hit,) = [h for h in store.bronze_by_lsn(120) if h.topic == topic.name]
    assert hit.table == topic.table
    later = store.downstream([(hit.table, hit.version)])
    assert {v.table for v in later} == {spec.history_table, spec.current_table}
    assert not {(v.table, v.version) for v in later} & {(v.table, v.version) for v in first_silver}
    # Silver's first batch on the rebuilt table read its versions 0..1: both lead there only.
    assert store.downstream([(topic.table, 0)]) == later


ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "order_id", "type": "long"},
        {"name": "amount", "type": "double"},
        {"name": "ordered_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}


def test_a_fact_reads_a_swapped_bronze_table_from_its_first_version_and_traces_its_rows(
    spark: SparkSession, loader_topic: Callable[..., LoaderTopic], tmp_path: Path
) -> None:
    topic = loader_topic("refact", partitions=1)
    schema_id = topic.register(ORDER)
    settings = topic.settings
    at = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
    positions = topic.produce(schema_id, ORDER, [{"order_id": n, "amount": 10.0 * n,
                                                  "ordered_at": at} for n in (1, 2)])  # fmt: skip
    topic.land(spark)
    name = f"orders_{topic.table.rsplit('_', 1)[-1]}"
    model = parse_model({"facts": [{"name": name, "source": topic.name, "grain": ["order_id"],
                                    "event_time": "ordered_at", "measures": ["amount"]}]},
                        source="test.yaml")  # fmt: skip
    fact = f"gold.fact_{name}"
    WarehouseBuilder(spark, model, source="test.yaml").build().raise_first()

    assert build(spark, settings, topic.kafka, topic.name).request.rows == 2
    topic.produce(schema_id, ORDER, [{"order_id": 3, "amount": 30.0, "ordered_at": at}])
    topic.land(spark)  # swaps the rebuild in; its versions are numbered from 0 again

    # The fact's newest entry names the old table: its rows are found in the rebuilt one.
    found = row_position(spark, fact, {"order_id": 2})
    assert (found["partition"], found["offset"]) == positions[1]

    WarehouseBuilder(spark, model, source="test.yaml").build().raise_first()
    found = row_position(spark, fact, {"order_id": 3})
    assert found["bronze_table"] == topic.table and found["offset"] == positions[1][1] + 1

    engine = _index(tmp_path)
    LineageSync(engine, Path(str(settings.warehouse_dir)), min_interval_s=0).sync()
    store = LineageStore(engine)
    old = f"{topic.table}@original"
    first = store.downstream([(old, 0)])
    assert [v.table for v in first] == [fact]
    # The build after the swap reads the rebuilt table from its first version on, so the
    # rebuild's version 0 leads to it, and not to the build that read the old version 0.
    after = store.downstream([(topic.table, 0)])
    assert [v.table for v in after] == [fact] and after[0].version > first[0].version
