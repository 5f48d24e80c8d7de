"""Register → publish through the gateway → land in bronze → read back with Spark SQL."""

import random
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from pyspark.sql import SparkSession

from hub_cli import demo
from hub_kafka.settings import KafkaSettings
from spark_loaders.settings import LoaderSettings
from tests.support.hub_client import create_feed, publish
from tests.support.loader import land_once

pytestmark = pytest.mark.e2e

TOPIC = "demo.page_views"
COUNT = 1_000


def test_published_page_views_land_in_bronze_exactly_once_with_equal_values(
    api_url: str,
    kafka_bootstrap: str,
    team_key: Callable[[str], str],
    spark: SparkSession,
    loader_settings: LoaderSettings,
    tmp_path: Path,
) -> None:
    key = team_key(demo.TEAM)
    create_feed(
        api_url, key, topic=TOPIC, schema=demo.schema_text(TOPIC), owner=demo.TEAM, partitions=2
    )
    schema_id = httpx.get(f"{api_url}/subjects/{TOPIC}-value/versions/latest").json()["id"]

    rng = random.Random(42)
    sent = [demo.page_view(rng) for _ in range(COUNT)]
    offsets: dict[str, tuple[int, int]] = {}
    for start in range(0, COUNT, 250):
        chunk = sent[start : start + 250]
        response = publish(
            api_url, key, TOPIC, [{"key": str(v["user_id"]), "value": v} for v in chunk]
        )
        assert response.status_code == 200, response.text
        for value, result in zip(chunk, response.json()["results"], strict=True):
            offsets[value["view_id"]] = (result["partition"], result["offset"])

    kafka = KafkaSettings(bootstrap_servers=kafka_bootstrap)
    # A loader of this topic alone: the session's Kafka holds every other test's topics too.
    settings = loader_settings.model_copy(
        update={"topic_pattern": re.escape(TOPIC), "checkpoint_dir": tmp_path / "checkpoints"}
    )
    land_once(spark, settings, kafka)

    rows = spark.sql(
        """
        SELECT view_id, user_id, url, referrer, device, duration_ms,
               unix_millis(viewed_at) AS viewed_ms,
               _hub_key, _hub_partition, _hub_offset, _hub_schema_id, _hub_timestamp,
               _hub_ingested_at
        FROM bronze.demo_page_views
        """
    ).collect()

    assert len(rows) == COUNT
    landed = {row["view_id"]: row for row in rows}
    assert len(landed) == COUNT  # each record once
    for value in sent:
        row = landed[value["view_id"]]
        assert row["user_id"] == value["user_id"]
        assert row["url"] == value["url"]
        assert row["referrer"] == value["referrer"]
        assert row["device"] == value["device"]
        assert row["duration_ms"] == value["duration_ms"]
        assert row["viewed_ms"] == _epoch_ms(value["viewed_at"])
        assert bytes(row["_hub_key"]) == str(value["user_id"]).encode()
        assert (row["_hub_partition"], row["_hub_offset"]) == offsets[value["view_id"]]
        assert row["_hub_schema_id"] == schema_id
        assert row["_hub_timestamp"] is not None and row["_hub_ingested_at"] is not None

    described = {
        r["col_name"]: r["comment"] for r in spark.sql("DESCRIBE bronze.demo_page_views").collect()
    }
    assert described["url"] == "Path of the page viewed."
    assert described["_hub_offset"] == "Kafka offset of the record in its partition."
    detail = spark.sql("DESCRIBE DETAIL bronze.demo_page_views").collect()[0]
    assert detail["description"] == "A page of the web shop viewed by a visitor."
    assert detail["format"] == "delta"
    assert detail["partitionColumns"] == ["_hub_ingest_date"]


def _epoch_ms(iso: str) -> int:
    return (datetime.fromisoformat(iso) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(
        milliseconds=1
    )
