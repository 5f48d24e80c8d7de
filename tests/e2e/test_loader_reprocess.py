"""Reprocessing: a bronze table rebuilt from Kafka into a new location and swapped in by the
running loader, which keeps landing records exactly once afterwards."""

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from hub_kafka.settings import KafkaSettings
from spark_loaders.bronze import BronzeLoader
from spark_loaders.reprocess import SwapRequests, build
from spark_loaders.settings import LoaderSettings
from tests.support.hub_client import unique_topic
from tests.support.loader import create_topic, own_loader_settings, produce_avro, register

pytestmark = pytest.mark.e2e

SCHEMA = {
    "type": "record",
    "name": "Reading",
    "fields": [{"name": "n", "type": "int"}],
}


def test_rebuild_swaps_in_atomically_and_keeps_what_the_stream_landed_meanwhile(
    api_url: str,
    admin_key: str,
    kafka_bootstrap: str,
    spark: SparkSession,
    loader_settings: LoaderSettings,
    tmp_path: Path,
) -> None:
    topic = unique_topic("rebuild")
    table = f"bronze.{topic.replace('.', '_')}"
    create_topic(kafka_bootstrap, topic, partitions=2)
    schema_id = register(api_url, admin_key, f"{topic}-value", SCHEMA)
    settings = own_loader_settings(loader_settings, tmp_path, topic.replace(".", "\\."))
    kafka = KafkaSettings(bootstrap_servers=kafka_bootstrap)

    def publish(numbers: range) -> None:
        produce_avro(kafka_bootstrap, topic, schema_id, SCHEMA, [{"n": n} for n in numbers])

    def land() -> None:
        query = BronzeLoader(spark, settings, kafka).start(available_now=True)
        query.awaitTermination(300)
        assert query.exception() is None

    def location() -> str:
        return str(spark.sql(f"DESCRIBE DETAIL {table}").first()["location"])  # type: ignore[index]

    publish(range(0, 40))
    land()
    old = location()

    result = build(spark, settings, kafka, topic)
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
