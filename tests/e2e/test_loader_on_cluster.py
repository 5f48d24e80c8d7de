"""The loader on a Spark standalone cluster: `hub load run --master spark://...` with a master
and two workers, each its own JVM. The job is the same as with `local[*]`: bronze, silver and
gold are built there, and the bronze table must equal Kafka, each record once, also when a
worker and then the driver are SIGKILLed mid-stream.
"""

import os
import random
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from pyspark.sql import SparkSession

from hub_cli import demo
from hub_core.naming import TopicName, table_suffix
from spark_loaders.services.cluster import LocalCluster
from tests.support.hub_client import create_feed, publish, unique_topic
from tests.support.loader import create_topic, produce_avro, register
from tests.support.loader_process import LoaderProcess, loader_env
from tests.support.ports import free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

# Records streamed during the kill test; `CLUSTER_KILL_RECORDS=100000` runs it at full size.
KILL_RECORDS = int(os.environ.get("CLUSTER_KILL_RECORDS", "20000"))

T0 = 1_750_000_000_000  # ms
SCHEMA = {
    "type": "record",
    "name": "Tick",
    "fields": [{"name": "n", "type": "long"}, {"name": "tag", "type": "string"}],
}


def test_bronze_silver_and_gold_run_on_a_standalone_cluster_each_record_once(
    api_url: str,
    kafka_bootstrap: str,
    team_key: Callable[[str], str],
    spark: SparkSession,
    spark_cluster: LocalCluster,
    tmp_path: Path,
) -> None:
    # A changelog feed: 300 customers created, then each moved to another country.
    key = team_key(demo.TEAM)
    topic = unique_topic(demo.TEAM)
    create_feed(api_url, key, topic=topic, schema=demo.schema_text("demo.customers"),
                owner=demo.TEAM, partitions=3)  # fmt: skip
    customers = range(1, 301)
    changes = [_customer(n, "SE", T0 + n) for n in customers]
    changes += [_customer(n, "NO", T0 + 1_000 + n, op="u") for n in customers]
    body = [{"key": str(c["after"]["customer_id"]), "value": c} for c in changes]
    response = publish(api_url, key, topic, body)
    assert response.status_code == 200, response.text
    placed = {(r["partition"], r["offset"]) for r in response.json()["results"]}
    assert len(placed) == len(changes)

    # One `--once` run on the cluster: bronze, then silver, then the gold dimension.
    suffix = table_suffix(TopicName(topic))
    model = tmp_path / "model.yaml"
    model.write_text(yaml.safe_dump({"dimensions": [
        {"name": f"customer_{suffix}", "source": topic, "business_key": ["customer_id"],
         "attributes": ["country"]},
    ]}))  # fmt: skip
    env = loader_env(tmp_path, api_url, kafka_bootstrap, topic)
    args = ("--once", "--master", spark_cluster.master_url, "--warehouse", str(model))
    with LoaderProcess(env, tmp_path / "once.log", *args) as loader:
        assert loader.process.wait(timeout=600) == 0, loader.text()[-3000:]

    warehouse = tmp_path / "warehouse"
    bronze = spark.read.format("delta").load(str(warehouse / "bronze.db" / suffix))
    positions = [(r[0], r[1]) for r in bronze.select("_hub_partition", "_hub_offset").collect()]
    assert len(positions) == len(set(positions)) == len(placed)
    assert set(positions) == placed
    current = spark.read.format("delta").load(str(warehouse / "silver.db" / f"{suffix}_current"))
    assert sorted((r[0], r[1]) for r in current.select("customer_id", "country").collect()) == [
        (n, "NO") for n in customers
    ]
    gold = spark.read.format("delta").load(str(warehouse / "gold.db" / f"dim_customer_{suffix}"))
    # A type 2 dimension: each customer's first version is closed, the move is current.
    versions = gold.where("customer_id IS NOT NULL").select("customer_id", "country", "is_current")
    assert sorted((r[0], r[1], r[2]) for r in versions.collect()) == [
        version for n in customers for version in ((n, "NO", True), (n, "SE", False))
    ]
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
    health = f"http://127.0.0.1:{free_port()}"
    env["HUB_LOADER_HEALTH_PORT"] = health.rsplit(":", 1)[1]
    master = spark_cluster.master_url
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"the driver's kill point drawn with seed {seed}")
    placed: dict[tuple[int, int], int] = {}
    producer = threading.Thread(
        target=_publish_paced,
        args=(kafka_bootstrap, topic, schema_id, placed, KILL_RECORDS),
        daemon=True,
    )
    try:
        with LoaderProcess(env, tmp_path / "killed.log", "--master", master) as loader:
            producer.start()
            landed = loader.wait_for(" <- ")
            # Landing: what the chart's probes ask the driver says so.
            wait_until(lambda: _status(f"{health}/readyz") == 200, timeout_s=30, what="ready")
            assert _status(f"{health}/healthz") == 200
            worker = spark_cluster.worker_pid(1)
            assert worker is not None
            os.kill(worker, signal.SIGKILL)
            # The survivor goes on landing: a batch after the kill, then the driver dies at a
            # random point around the next batch's checkpoint commit.
            loader.wait_for(" <- ", after=landed)
            time.sleep(rng.uniform(0.0, 4.0))
            loader.kill()
        producer.join(timeout=600)
        assert len(placed) == KILL_RECORDS, "the producer did not get every record acknowledged"

        with LoaderProcess(env, tmp_path / "final.log", "--once", "--master", master) as loader:
            assert loader.process.wait(timeout=600) == 0, loader.text()[-3000:]
    finally:
        spark_cluster.start()  # the next test gets both workers again

    _assert_table_equals_kafka(spark, tmp_path, topic, placed, schema_id)


def _customer(customer_id: int, country: str, ms: int, *, op: str = "c") -> dict[str, Any]:
    row = {"customer_id": customer_id, "name": f"Customer {customer_id}",
           "email": f"c{customer_id}@example.com", "country": country}  # fmt: skip
    value = demo.change_event(op, "customers", None, row)
    value["ts_ms"] = value["source"]["ts_ms"] = ms
    return value


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


def _status(url: str) -> int:
    return httpx.get(url, timeout=5).status_code


def _finished_applications(cluster: LocalCluster) -> list[str]:
    state = httpx.get(f"http://127.0.0.1:{cluster.master_webui_port}/json/").json()
    return [app["name"] for app in state["completedapps"]]
