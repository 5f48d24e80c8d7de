"""The whole hub over a SASL_SSL Kafka: the API, a connector and the loader, each connecting with
the same `HUB_KAFKA_*` security settings (SCRAM-SHA-512 over TLS, the broker verified against
its CA)."""

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from hub_kafka.settings import KafkaSettings
from spark_loaders.settings import LoaderSettings
from tests.support.api_server import serve_api
from tests.support.connect import connector_file, running_worker
from tests.support.hub_client import create_feed, create_key, publish, unique_topic
from tests.support.loader import land_once
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

SCHEMA = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}
SECURITY_FIELDS = (
    "security_protocol",
    "sasl_mechanism",
    "sasl_username",
    "sasl_password_file",
    "ssl_ca_location",
)


def _security(kafka: KafkaSettings) -> dict[str, Any]:
    """The security settings of `kafka`, as `serve_api` takes more settings."""
    return {name: getattr(kafka, name) for name in SECURITY_FIELDS}


def test_api_connector_and_loader_carry_records_over_sasl_ssl(
    secured_kafka: KafkaSettings,
    spark: SparkSession,
    loader_settings: LoaderSettings,
    tmp_path: Path,
) -> None:
    database = f"sqlite:///{tmp_path / 'hub.db'}"
    with serve_api(
        database_url=database,
        bootstrap_servers=secured_kafka.bootstrap_servers,
        kafka=_security(secured_kafka),
    ) as api_url:
        key = create_key(database, team="shop")
        topic = unique_topic("shop")
        create_feed(api_url, key, topic=topic, schema=SCHEMA, owner="shop", partitions=1)
        response = publish(
            api_url, key, topic, [{"value": {"id": n, "item": f"item {n}"}} for n in (1, 2, 3)]
        )
        assert response.status_code == 200, response.text

        log_file = tmp_path / "app.log"
        log_file.write_text("".join(json.dumps({"n": n}) + "\n" for n in (10, 11)))
        connector = connector_file(
            tmp_path,
            kind="logfile",
            owner="shop",
            source={
                "paths": [str(log_file)],
                "format": "json",
                "poll_seconds": 0.2,
                "fields": {"n": {"type": "long", "required": True}},
            },
        )
        settings = loader_settings.model_copy(
            update={
                "registry_url": api_url,
                "checkpoint_dir": tmp_path / "checkpoints",
                "topic_pattern": "|".join(t.replace(".", "[.]") for t in (topic, connector.topic)),
                "schema_refresh_seconds": 0.0,
            }
        )
        with running_worker(
            [connector.file], database_url=database, bootstrap="", kafka=secured_kafka
        ):
            wait_until(
                lambda: _landed(spark, settings, secured_kafka, connector.topic) == 2,
                timeout_s=120,
                what="the connector's records in bronze",
            )

        rows = spark.sql(f"SELECT id, item FROM bronze.{topic.replace('.', '_')}").collect()
        assert sorted((r["id"], r["item"]) for r in rows) == [
            (1, "item 1"),
            (2, "item 2"),
            (3, "item 3"),
        ]
        numbers = spark.sql(f"SELECT n FROM bronze.{connector.topic.replace('.', '_')}")
        assert sorted(r["n"] for r in numbers.collect()) == [10, 11]


def _landed(spark: SparkSession, settings: LoaderSettings, kafka: KafkaSettings, topic: str) -> int:
    """Run the loader to catch-up over the secured broker; rows of `topic`'s bronze table."""
    land_once(spark, settings, kafka)
    table = f"bronze.{topic.replace('.', '_')}"
    if not spark.catalog.tableExists(table):
        return 0
    return spark.table(table).count()
