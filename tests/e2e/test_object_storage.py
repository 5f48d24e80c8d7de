"""Tables and checkpoints on S3-compatible object storage: `hub load run` with its warehouse and
checkpoints on `s3a://` URIs of a real S3 server (versitygw), as a production loader runs on S3.

The server's posix backend keeps each object as a file under its root, so the test reads what
the loader wrote with the tests' own Spark session, by path, straight from the bucket's folder.
A running loader reads its tables' Delta logs in the bucket for an API that cannot: lineage
(`GET /ledger`, ADR 0048) and the console's table figures (`GET /status`).
"""

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from pyspark.sql import SparkSession

from hub_cli import demo
from hub_core.naming import TopicName, table_suffix
from spark_loaders.bronze.feed_status import STATUS_FILE as FEED_STATUS_FILE
from tests.support.api_server import serve_api
from tests.support.hub_client import bearer, create_feed, publish, unique_topic
from tests.support.loader import produce
from tests.support.loader_process import LoaderProcess, loader_env
from tests.support.object_store import Bucket, ObjectStore
from tests.support.ports import free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

T0 = 1_750_000_000_000  # ms


@pytest.fixture(scope="module")
def bucket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bucket]:
    """A bucket on a versitygw server that runs for this module's tests."""
    home = tmp_path_factory.mktemp("object-store")
    with ObjectStore(home / "root", home / "versitygw.log") as server:
        yield server.bucket("hub-tables")


def _s3_env(home: Path, bucket: Bucket, api_url: str, bootstrap: str, topic: str) -> dict[str, str]:
    """A loader of `topic` whose warehouse and checkpoints are in the bucket; the metastore
    and the loader's local state stay in `home`."""
    env = loader_env(home, api_url, bootstrap, topic)
    env.update(
        {
            "HUB_LOADER_WAREHOUSE_DIR": bucket.uri("warehouse"),
            "HUB_LOADER_CHECKPOINT_DIR": bucket.uri("checkpoints"),
            "HUB_LOADER_LOCAL_STATE_DIR": str(home / "state"),
            "HUB_LOADER_S3_ENDPOINT": bucket.endpoint,
            "HUB_LOADER_S3_ACCESS_KEY": bucket.access_key,
            "HUB_LOADER_S3_SECRET_KEY": bucket.secret_key,
            "HUB_LOADER_S3_PATH_STYLE_ACCESS": "true",
            "HUB_LOADER_S3_REGION": "us-east-1",
        }
    )
    return env


def _customer(customer_id: int, country: str, ms: int) -> dict[str, Any]:
    row = {"customer_id": customer_id, "name": f"Customer {customer_id}",
           "email": f"c{customer_id}@example.com", "country": country}  # fmt: skip
    value = demo.change_event("c", "customers", None, row)
    value["ts_ms"] = value["source"]["ts_ms"] = ms
    return value


def _customers(api_url: str, key: str, home: Path, *, customers: int) -> tuple[str, Path]:
    """A new changelog feed of `customers` created customers, and a warehouse model in `home`
    with their dimension `gold.dim_customer_<feed's table suffix>`."""
    topic = unique_topic(demo.TEAM)
    create_feed(api_url, key, topic=topic, schema=demo.schema_text("demo.customers"),
                owner=demo.TEAM)  # fmt: skip
    changes = [_customer(n, "SE", T0 + n) for n in range(1, customers + 1)]
    body = [{"key": str(c["after"]["customer_id"]), "value": c} for c in changes]
    response = publish(api_url, key, topic, body)
    assert response.status_code == 200, response.text
    suffix = table_suffix(TopicName(topic))
    model = home / "model.yaml"
    model.write_text(yaml.safe_dump({"dimensions": [
        {"name": f"customer_{suffix}", "source": topic, "business_key": ["customer_id"],
         "attributes": ["name", "country"]},
    ]}))  # fmt: skip
    return topic, model


def test_bronze_silver_gold_and_quarantine_land_in_the_bucket_each_record_once(
    api_url: str,
    kafka_bootstrap: str,
    team_key: Callable[[str], str],
    spark: SparkSession,
    bucket: Bucket,
    tmp_path: Path,
) -> None:
    topic, model = _customers(api_url, team_key(demo.TEAM), tmp_path, customers=3)
    produce(kafka_bootstrap, topic, [b"not an Avro record"])  # for quarantine
    env = _s3_env(tmp_path, bucket, api_url, kafka_bootstrap, topic)

    # One `--once` run lands bronze and quarantine, then catches silver up and builds gold.
    suffix = table_suffix(TopicName(topic))
    with LoaderProcess(env, tmp_path / "once.log", "--once", "--warehouse", str(model)) as loader:
        assert loader.process.wait(timeout=600) == 0, loader.text()[-3000:]
        log_text = loader.text()
    assert bucket.secret_key not in log_text

    warehouse = bucket.folder / "warehouse"
    tables = {
        "bronze": warehouse / "bronze.db" / suffix,
        "quarantine": warehouse / "quarantine.db" / suffix,
        "silver": warehouse / "silver.db" / f"{suffix}_current",
        "gold": warehouse / "gold.db" / f"dim_customer_{suffix}",
    }
    for kind, folder in tables.items():
        assert (folder / "_delta_log" / "00000000000000000000.json").is_file(), kind

    bronze = spark.read.format("delta").load(str(tables["bronze"]))
    offsets = [(r["_hub_partition"], r["_hub_offset"]) for r in bronze.collect()]
    assert len(offsets) == len(set(offsets)) == 3
    assert sorted(r["after"]["customer_id"] for r in bronze.collect()) == [1, 2, 3]
    assert spark.read.format("delta").load(str(tables["quarantine"])).count() == 1
    current = spark.read.format("delta").load(str(tables["silver"]))
    assert sorted(r["customer_id"] for r in current.collect()) == [1, 2, 3]
    gold = spark.read.format("delta").load(str(tables["gold"]))
    assert sorted(r["customer_id"] for r in gold.collect() if r["customer_id"]) == [1, 2, 3]

    # The checkpoints and the checkpoint's identity are in the bucket too; the status file
    # the operator's `hub load status` reads stays on the loader's disk.
    checkpoints = bucket.folder / "checkpoints"
    assert (checkpoints / "hub-bronze" / "offsets" / "0").is_file()
    assert (checkpoints / "hub-bronze.txn-app-id").is_file()
    assert any(p.name.startswith("hub-silver-") for p in checkpoints.iterdir())
    feeds = json.loads((tmp_path / "state" / FEED_STATUS_FILE).read_text())
    assert topic in json.dumps(feeds)
    assert not list(checkpoints.glob("*.json"))


def test_an_api_traces_lineage_of_tables_in_the_bucket_through_the_running_loader(
    api_url: str,
    api_database: str,
    kafka_bootstrap: str,
    team_key: Callable[[str], str],
    bucket: Bucket,
    tmp_path: Path,
) -> None:
    key = team_key(demo.TEAM)
    topic, model = _customers(api_url, key, tmp_path, customers=2)
    suffix = table_suffix(TopicName(topic))
    env = _s3_env(tmp_path, bucket, api_url, kafka_bootstrap, topic)
    token = "s3-lineage-token"
    health = f"http://127.0.0.1:{free_port()}"
    env |= {"HUB_LOADER_HEALTH_PORT": health.rsplit(":", 1)[1], "HUB_LOADER_CONTROL_TOKEN": token,
            "HUB_LOADER_STATUS_REFRESH_SECONDS": "1"}  # fmt: skip
    dimension = f"gold.dim_customer_{suffix}"

    # The API cannot read the bucket: the running loader reads its tables' Delta logs for it.
    with (
        LoaderProcess(env, tmp_path / "loader.log", "--warehouse", str(model)) as loader,
        serve_api(
            database_url=api_database,
            bootstrap_servers=kafka_bootstrap,
            api={
                "loader_url": health,
                "loader_token": token,
                "lineage_source": "loader",
                "lineage_warehouse_dir": tmp_path / "nothing-here",
            },
        ) as url,
        httpx.Client(base_url=url, headers=bearer(key), timeout=120) as http,
    ):

        def traced() -> bool:
            answer = http.get("/v1/lineage/positions",
                              params={"topic": topic, "partition": 0, "offset": 0})  # fmt: skip
            tables = {v["table"] for v in answer.json().get("versions", [])}
            return answer.status_code == 200 and dimension in tables

        wait_until(traced, timeout_s=300, what="the first change traced to its dimension")
        answer = http.get("/v1/lineage/positions",
                          params={"topic": topic, "partition": 0, "offset": 0})  # fmt: skip
        tables = {v["table"] for v in answer.json()["versions"]}
        assert {f"bronze.{suffix}", f"silver.{suffix}_current", dimension} <= tables
        # A gold row by its key, found by the same loader in the bucket.
        row = http.get("/v1/lineage/rows", params={"table": dimension, "key": "customer_id=2"})
        assert row.status_code == 200, row.text
        assert (row.json()["topic"], row.json()["bronze_table"]) == (topic, f"bronze.{suffix}")

        # The console's Tables page: the loader's status reads the tables' logs in the bucket.
        def rows() -> dict[tuple[str, str], int | None]:
            status = httpx.get(f"{health}/status", headers=bearer(token), timeout=30).json()
            return {(t["layer"], t["table"]): t["rows"] for t in status["tables"]}

        wait_until(lambda: ("gold", f"dim_customer_{suffix}") in rows(), timeout_s=30,
                   what="the loader's status of the tables in the bucket")  # fmt: skip
        landed = rows()
        assert landed[("bronze", suffix)] == 2
        assert landed[("gold", f"dim_customer_{suffix}")] == 3  # with the unknown member
        assert bucket.secret_key not in loader.text()
