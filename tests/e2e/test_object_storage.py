"""Tables and checkpoints on S3-compatible object storage: `hub load run` with its warehouse and
checkpoints on `s3a://` URIs of a real S3 server (versitygw), as a production loader runs on S3.

The server's posix backend keeps each object as a file under its root, so the test reads what
the loader wrote with the tests' own Spark session, by path, straight from the bucket's folder.
"""

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession

from hub_cli import demo
from hub_core.naming import TopicName, table_suffix
from spark_loaders.feed_status import STATUS_FILE as FEED_STATUS_FILE
from tests.support.hub_client import create_feed, publish, unique_topic
from tests.support.loader import produce
from tests.support.loader_process import LoaderProcess, loader_env
from tests.support.object_store import Bucket, ObjectStore

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


def test_bronze_silver_gold_and_quarantine_land_in_the_bucket_each_record_once(
    api_url: str,
    kafka_bootstrap: str,
    team_key: Callable[[str], str],
    spark: SparkSession,
    bucket: Bucket,
    tmp_path: Path,
) -> None:
    key = team_key(demo.TEAM)
    topic = unique_topic("s3")
    create_feed(api_url, key, topic=topic, schema=demo.schema_text("demo.customers"),
                owner=demo.TEAM)  # fmt: skip
    changes = [_customer(n, "SE", T0 + n) for n in (1, 2, 3)]
    body = [{"key": str(c["after"]["customer_id"]), "value": c} for c in changes]
    response = publish(api_url, key, topic, body)
    assert response.status_code == 200, response.text
    produce(kafka_bootstrap, topic, [b"not an Avro record"])  # for quarantine
    env = _s3_env(tmp_path, bucket, api_url, kafka_bootstrap, topic)

    # One `--once` run lands bronze and quarantine, then catches silver up and builds gold.
    suffix = table_suffix(TopicName(topic))
    model = tmp_path / "model.yaml"
    model.write_text(yaml.safe_dump({"dimensions": [
        {"name": f"customer_{suffix}", "source": topic, "business_key": ["customer_id"],
         "attributes": ["name", "country"]},
    ]}))  # fmt: skip
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
