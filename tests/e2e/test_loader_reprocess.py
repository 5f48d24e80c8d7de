"""Reprocessing: a bronze table rebuilt from Kafka into a new location and swapped in by the
running loader, which keeps landing records exactly once afterwards, each traced to its commit
there."""

from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from catalog.lineage import LineageStore, LineageSync
from hub_core.database import create_database_engine
from migrations import migrate
from spark_loaders.reprocess import SwapRequests, build
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
