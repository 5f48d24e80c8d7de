"""The loader on a Spark standalone cluster: `hub load run --master spark://...` with a master
and two workers, each its own JVM. The job is the same as with `local[*]`: the table must equal
Kafka, each record once, also when a worker and then the driver are SIGKILLed mid-stream.
"""

import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from pyspark.sql import SparkSession

from spark_loaders.cluster import LocalCluster
from tests.support.hub_client import unique_topic
from tests.support.loader import create_topic, produce_avro, register
from tests.support.loader_process import LoaderProcess, loader_env

pytestmark = pytest.mark.e2e

SCHEMA = {
    "type": "record",
    "name": "Tick",
    "fields": [{"name": "n", "type": "long"}, {"name": "tag", "type": "string"}],
}


def test_the_loader_on_a_standalone_cluster_lands_each_record_once(
    api_url: str,
    admin_key: str,
    kafka_bootstrap: str,
    spark: SparkSession,
    spark_cluster: LocalCluster,
    tmp_path: Path,
) -> None:
    topic = unique_topic("cluster")
    create_topic(kafka_bootstrap, topic, partitions=3)
    schema_id = register(api_url, admin_key, f"{topic}-value", SCHEMA)
    values: list[dict[str, Any]] = [{"n": n, "tag": f"t{n % 97}"} for n in range(3_000)]
    positions = produce_avro(kafka_bootstrap, topic, schema_id, SCHEMA, values)
    placed = dict(zip(positions, (v["n"] for v in values), strict=True))

    env = loader_env(tmp_path, api_url, kafka_bootstrap, topic)
    master = spark_cluster.master_url
    with LoaderProcess(env, tmp_path / "once.log", "--once", "--master", master) as loader:
        assert loader.process.wait(timeout=600) == 0, loader.text()[-3000:]

    _assert_table_equals_kafka(spark, tmp_path, topic, placed, schema_id)
    # It ran on the cluster: the master saw the loader's application, and its executors.
    assert "hub-loader" in _finished_applications(spark_cluster)


def test_a_killed_worker_and_a_killed_driver_lose_and_repeat_no_record(
    api_url: str,
    admin_key: str,
    kafka_bootstrap: str,
    spark: SparkSession,
    spark_cluster: LocalCluster,
    tmp_path: Path,
) -> None:
    topic = unique_topic("clusterkill")
    create_topic(kafka_bootstrap, topic, partitions=3)
    schema_id = register(api_url, admin_key, f"{topic}-value", SCHEMA)
    env = loader_env(tmp_path, api_url, kafka_bootstrap, topic)
    env["HUB_LOADER_MAX_OFFSETS_PER_TRIGGER"] = "3000"
    master = spark_cluster.master_url
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"the driver's kill point drawn with seed {seed}")
    placed: dict[tuple[int, int], int] = {}
    producer = threading.Thread(
        target=_publish_paced,
        args=(kafka_bootstrap, topic, schema_id, placed, 20_000),
        daemon=True,
    )
    try:
        with LoaderProcess(env, tmp_path / "killed.log", "--master", master) as loader:
            producer.start()
            landed = loader.wait_for(" <- ")
            worker = spark_cluster.worker_pid(1)
            assert worker is not None
            os.kill(worker, signal.SIGKILL)
            # The survivor goes on landing: a batch after the kill, then the driver dies at a
            # random point around the next batch's checkpoint commit.
            loader.wait_for(" <- ", after=landed)
            time.sleep(rng.uniform(0.0, 4.0))
            loader.kill()
        producer.join(timeout=600)
        assert len(placed) == 20_000, "the producer did not get every record acknowledged"

        with LoaderProcess(env, tmp_path / "final.log", "--once", "--master", master) as loader:
            assert loader.process.wait(timeout=600) == 0, loader.text()[-3000:]
    finally:
        spark_cluster.start()  # the next test gets both workers again

    _assert_table_equals_kafka(spark, tmp_path, topic, placed, schema_id)


def _publish_paced(
    bootstrap: str, topic: str, schema_id: int, placed: dict[tuple[int, int], int], count: int
) -> None:
    """Publish `count` records in chunks over several seconds, so they arrive during the kills."""
    chunk = 1_000
    for start in range(0, count, chunk):
        values: list[dict[str, Any]] = [
            {"n": n, "tag": f"t{n % 97}"} for n in range(start, start + chunk)
        ]
        positions = produce_avro(bootstrap, topic, schema_id, SCHEMA, values)
        placed.update(zip(positions, (v["n"] for v in values), strict=True))
        time.sleep(0.5)


def _assert_table_equals_kafka(
    spark: SparkSession,
    home: Path,
    topic: str,
    placed: dict[tuple[int, int], int],
    schema_id: int,
) -> None:
    """The bronze table, read by path, holds every Kafka record once: the same (partition,
    offset) set and the same values."""
    location = home / "warehouse" / "bronze.db" / topic.replace(".", "_")
    rows = (
        spark.read.format("delta")
        .load(str(location))
        .select("_hub_partition", "_hub_offset", "n", "tag", "_hub_schema_id")
        .collect()
    )
    assert len(rows) == len(placed)
    by_position = {(r[0], r[1]): (r[2], r[3], r[4]) for r in rows}
    assert len(by_position) == len(placed)  # no record twice
    assert set(by_position) == set(placed)  # no record missing, none invented
    for position, n in placed.items():
        assert by_position[position] == (n, f"t{n % 97}", schema_id)


def _finished_applications(cluster: LocalCluster) -> list[str]:
    state = httpx.get(f"http://127.0.0.1:{cluster.master_webui_port}/json/").json()
    return [app["name"] for app in state["completedapps"]]
