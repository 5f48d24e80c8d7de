"""The whole hub over a SASL_SSL Kafka: the API, a connector and the loader, each connecting with
the same `HUB_KAFKA_*` security settings (SCRAM-SHA-512 over TLS, the broker verified against
its CA), from a feed's registration to its gold dimension."""

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession

from hub_cli import demo
from hub_core.naming import TopicName, table_suffix
from hub_kafka.settings import KafkaSettings
from spark_loaders.runner.downstream import build_model
from spark_loaders.settings import LoaderSettings
from tests.support.api_server import serve_api
from tests.support.connect import connector_file, running_worker
from tests.support.hub_client import create_feed, create_key, publish, unique_topic
from tests.support.loader import land_once
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

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


def test_registry_publish_connector_bronze_silver_and_gold_work_over_sasl_ssl(
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
        # A changelog feed: its schema registered, three customers published.
        key = create_key(database, team=demo.TEAM)
        topic = unique_topic(demo.TEAM)
        create_feed(api_url, key, topic=topic, schema=demo.schema_text("demo.customers"),
                    owner=demo.TEAM, partitions=1)  # fmt: skip
        changes = [_customer(n, country) for n, country in ((1, "SE"), (2, "NO"), (3, "DK"))]
        body = [{"key": str(c["after"]["customer_id"]), "value": c} for c in changes]
        response = publish(api_url, key, topic, body)
        assert response.status_code == 200, response.text

        log_file = tmp_path / "app.log"
        log_file.write_text("".join(json.dumps({"n": n}) + "\n" for n in (10, 11)))
        connector = connector_file(
            tmp_path,
            kind="logfile",
            owner=demo.TEAM,
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

        suffix = table_suffix(TopicName(topic))
        rows = spark.sql(f"SELECT after.customer_id FROM bronze.{suffix}").collect()
        assert sorted(r["customer_id"] for r in rows) == [1, 2, 3]
        numbers = spark.sql(f"SELECT n FROM bronze.{table_suffix(TopicName(connector.topic))}")
        assert sorted(r["n"] for r in numbers.collect()) == [10, 11]

        # Silver follows bronze, and gold is built on it.
        model = tmp_path / "model.yaml"
        model.write_text(yaml.safe_dump({"dimensions": [
            {"name": f"customer_{suffix}", "source": topic, "business_key": ["customer_id"],
             "attributes": ["country"]},
        ]}))  # fmt: skip
        build_model(spark, settings, model).raise_first()
        current = spark.sql(f"SELECT customer_id, country FROM silver.{suffix}_current")
        assert sorted((r[0], r[1]) for r in current.collect()) == [(1, "SE"), (2, "NO"), (3, "DK")]
        gold = spark.sql(f"SELECT customer_id, country FROM gold.dim_customer_{suffix}")
        members = sorted((r[0], r[1]) for r in gold.collect() if r[0] is not None)
        assert members == [(1, "SE"), (2, "NO"), (3, "DK")]


def _customer(customer_id: int, country: str) -> dict[str, Any]:
    row = {"customer_id": customer_id, "name": f"Customer {customer_id}",
           "email": f"c{customer_id}@example.com", "country": country}  # fmt: skip
    return demo.change_event("c", "customers", None, row)


def _landed(spark: SparkSession, settings: LoaderSettings, kafka: KafkaSettings, topic: str) -> int:
    """Run the loader to catch-up over the secured broker; rows of `topic`'s bronze table."""
    land_once(spark, settings, kafka)
    table = f"bronze.{topic.replace('.', '_')}"
    if not spark.catalog.tableExists(table):
        return 0
    return spark.table(table).count()
