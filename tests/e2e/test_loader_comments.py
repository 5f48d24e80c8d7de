"""Avro docs become table and column comments exactly as written: never substituted or parsed."""

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from pyspark.sql import SparkSession

from hub_kafka.settings import KafkaSettings
from spark_loaders.settings import LoaderSettings
from tests.support.hub_client import create_feed, publish, unique_topic
from tests.support.loader import REGISTRY_MEDIA_TYPE, land_once

pytestmark = pytest.mark.e2e

TEAM = "doc_writers"
# Spark substitutes ${env:...} and ${system:...} in SQL text unless told not to; a quote or a
# backslash breaks naive quoting.
TRICKY = "home=${env:HOME} user=${system:user.name} it's \\ 'quoted'"


def _schema(*, doc: str | None, with_note: bool) -> dict[str, object]:
    fields: list[dict[str, object]] = [
        {"name": "id", "type": "long", "doc": "Identifier."},
        {"name": "page", "type": "string", **({"doc": doc} if doc else {})},
    ]
    if with_note:
        fields.append({"name": "note", "type": ["null", "string"], "default": None, "doc": TRICKY})
    return {
        "type": "record",
        "name": "Visit",
        "namespace": "docs",
        **({"doc": doc} if doc else {}),
        "fields": fields,
    }


def _comments(spark: SparkSession, table: str) -> tuple[str | None, dict[str, str | None]]:
    detail = spark.sql(f"DESCRIBE DETAIL {table}").first()
    assert detail is not None
    columns = {r["col_name"]: r["comment"] for r in spark.sql(f"DESCRIBE {table}").collect()}
    return detail["description"], columns


def test_docs_with_variables_quotes_and_backslashes_land_as_literal_comments(
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
    # The first version has the doc already: the table is created with it.
    create_feed(
        api_url,
        key,
        topic=topic,
        schema=_schema(doc=TRICKY, with_note=False),
        owner=TEAM,
        partitions=1,
    )
    settings = loader_settings.model_copy(
        update={
            "checkpoint_dir": tmp_path / "checkpoints",
            "topic_pattern": topic.replace(".", "\\."),
            "schema_refresh_seconds": 0.0,
        }
    )
    kafka = KafkaSettings(bootstrap_servers=kafka_bootstrap)
    response = publish(api_url, key, topic, [{"key": "1", "value": {"id": 1, "page": "/a"}}])
    assert response.status_code == 200, response.text
    land_once(spark, settings, kafka)

    description, columns = _comments(spark, table)
    assert description == TRICKY
    assert columns["page"] == TRICKY

    # A later version changes the docs of an existing table: the comments are altered in place.
    changed = TRICKY + " v2 ${HOME} \\' \\\\"
    evolved = _schema(doc=changed, with_note=True)
    registered = httpx.post(
        f"{api_url}/subjects/{topic}-value/versions",
        json={"schema": json.dumps(evolved)},
        headers={"Authorization": f"Bearer {key}", "Content-Type": REGISTRY_MEDIA_TYPE},
    )
    assert registered.status_code == 200, registered.text
    response = publish(
        api_url, key, topic, [{"key": "2", "value": {"id": 2, "page": "/b", "note": "x"}}]
    )
    assert response.status_code == 200, response.text
    land_once(spark, settings, kafka)

    description, columns = _comments(spark, table)
    assert description == changed
    assert columns["page"] == changed
    assert columns["note"] == TRICKY
    assert spark.conf.get("spark.sql.variable.substitute") == "false"
