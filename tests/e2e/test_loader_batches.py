"""A running loader's batches: each stamps the time it landed, and runs the code the one before
it compiled."""

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from hub_kafka.settings import KafkaSettings
from spark_loaders.bronze.loader import BronzeLoader
from spark_loaders.runtime.metrics import source_lag
from spark_loaders.runtime.progress import last_progress, recent_progress
from spark_loaders.settings import LoaderSettings
from tests.support.hub_client import create_feed, publish, unique_topic
from tests.support.loader import compilations, live_count
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

TEAM = "batch_stampers"
SCHEMA = {
    "type": "record",
    "name": "Visit",
    "namespace": "batches",
    "fields": [{"name": "id", "type": "long"}, {"name": "page", "type": "string"}],
}


def test_each_batch_stamps_its_landing_time_and_compiles_no_new_code(
    api_url: str,
    kafka_bootstrap: str,
    team_key: Callable[[str], str],
    spark: SparkSession,
    loader_settings: LoaderSettings,
    tmp_path: Path,
) -> None:
    key = team_key(TEAM)
    topic = unique_topic(TEAM)
    table = f"bronze.{topic.replace('.', '_')}"
    create_feed(api_url, key, topic=topic, schema=SCHEMA, owner=TEAM, partitions=1)
    settings = loader_settings.model_copy(
        update={
            "checkpoint_dir": tmp_path / "checkpoints",
            "topic_pattern": topic.replace(".", "\\."),
            "trigger_seconds": 0.5,
        }
    )
    query = BronzeLoader(spark, settings, KafkaSettings(bootstrap_servers=kafka_bootstrap)).start()
    published: list[tuple[int, datetime]] = []
    compiled: list[int] = []
    try:
        for n in range(1, 6):
            published.append((n, datetime.now(UTC)))
            response = publish(api_url, key, topic, [{"value": {"id": n, "page": f"/{n}"}}])
            assert response.status_code == 200, response.text
            wait_until(
                lambda n=n: live_count(spark, table) == n,  # type: ignore[misc]
                timeout_s=120,
                what=f"record {n} in {table}",
            )
            compiled.append(compilations(spark))
    finally:
        query.stop()
    assert query.exception() is None

    rows = {
        r["id"]: (r["_hub_ingested_at"], r["_hub_ingest_date"])
        for r in spark.sql(f"SELECT id, _hub_ingested_at, _hub_ingest_date FROM {table}").collect()
    }
    # Spark reads the timestamps back as naive UTC (the session's time zone).
    for n, sent in published:
        landed_at, landed_on = rows[n]
        assert landed_at.replace(tzinfo=UTC) >= sent.replace(microsecond=0), (n, landed_at, sent)
        assert landed_on == landed_at.date()
    assert len({landed_at for landed_at, _ in rows.values()}) == len(published)
    # The first batches create the table and then append to it; from the third on, a batch of
    # the same records runs the code its predecessor compiled. A literal timestamp in the
    # batch's plan would change that code, and compile it again, every batch.
    assert compiled[-1] == compiled[2], compiled


def test_the_progress_reports_as_the_loader_reads_them_give_each_batchs_lag(
    api_url: str,
    kafka_bootstrap: str,
    team_key: Callable[[str], str],
    spark: SparkSession,
    loader_settings: LoaderSettings,
    tmp_path: Path,
) -> None:
    key = team_key(TEAM)
    topic = unique_topic(TEAM)
    create_feed(api_url, key, topic=topic, schema=SCHEMA, owner=TEAM, partitions=1)
    records = [{"value": {"id": n, "page": f"/{n}"}} for n in range(3)]
    assert publish(api_url, key, topic, records).status_code == 200
    settings = loader_settings.model_copy(
        update={
            "checkpoint_dir": tmp_path / "checkpoints",
            "topic_pattern": topic.replace(".", "\\."),
            "max_offsets_per_trigger": 1,
        }
    )
    query = BronzeLoader(spark, settings, KafkaSettings(bootstrap_servers=kafka_bootstrap)).start(
        available_now=True
    )
    query.awaitTermination(600)
    assert query.exception() is None

    reports = [r for r in recent_progress(query) if r["numInputRows"] > 0]
    assert [r["batchId"] for r in reports] == [0, 1, 2]
    # One record a batch, of three: the lag metric reads 2, 1, then 0 records behind.
    assert [source_lag(r).get((topic, "0")) for r in reports] == [2, 1, 0]
    last = last_progress(query)
    assert last is not None and last["batchId"] >= 2
