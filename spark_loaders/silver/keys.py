"""Finding changelog topics among the bronze tables, and their key columns.

A bronze table is a changelog when its columns are the change-event envelope (`before`, `after`,
`op`, `ts_ms`, `source` with `lsn` and `ts_ms`): the shape, not the feed kind, decides, because
CDC topics written by a connector are not feeds created through the API. The key columns come
from the registry: the fields of the `<topic>-key` subject when there is one (CDC connectors
register it), else the fields of the row record that are not nullable (the envelope contract
makes every row column a nullable union except the primary key columns).
"""

import json
import logging
import re
from typing import Any

import httpx
from pyspark.sql import SparkSession

from hub_core.naming import TopicName, table_suffix
from spark_loaders.errors import LoaderError
from spark_loaders.settings import LoaderSettings
from spark_loaders.silver.changes import ChangelogSpec, is_envelope, row_fields

log = logging.getLogger(__name__)


def discover(spark: SparkSession, settings: LoaderSettings) -> list[ChangelogSpec]:
    """A spec for every bronze table of this loader's topics (`HUB_LOADER_TOPIC_PATTERN`)
    holding change events whose key the registry tells.

    The metastore may hold the tables of other loaders (several loaders, each with a pattern of
    its own, can share one): their silver tables are theirs to follow, with their checkpoints.
    """
    if not spark.catalog.databaseExists("bronze"):
        return []
    envelopes = [
        t.name
        for t in spark.catalog.listTables("bronze")
        if is_envelope(spark.table(f"bronze.{t.name}").schema)
    ]
    if not envelopes:
        return []
    ours = re.compile(settings.topic_pattern)
    with _registry(settings) as http:
        topics = {table_suffix(TopicName(t)): t for t in _value_topics(http)}
        specs = []
        for name in sorted(envelopes):
            topic = topics.get(name)
            if topic is None:
                log.warning("bronze.%s holds change events but no registry subject names it", name)
                continue
            if not ours.fullmatch(topic):
                continue  # another loader's topic
            fields = row_fields(spark.table(f"bronze.{name}").schema)
            keys = key_columns(http, topic)
            if not keys or any(k not in fields for k in keys):
                log.warning(
                    "no key columns for %s (key subject or non-nullable row fields): %s",
                    topic,
                    keys,
                )
                continue
            specs.append(
                ChangelogSpec(
                    bronze_table=f"bronze.{name}", silver_prefix=f"silver.{name}", key_columns=keys
                )
            )
    return specs


def key_columns(http: httpx.Client, topic: str) -> tuple[str, ...]:
    """The key columns of a changelog topic, from its key subject or its row record."""
    key = _latest(http, f"{topic}-key")
    if key is not None and key.get("type") == "record":
        return tuple(f["name"] for f in key["fields"])
    value = _latest(http, f"{topic}-value")
    if value is None:
        return ()
    return required_row_fields(value)


def required_row_fields(envelope: dict[str, Any]) -> tuple[str, ...]:
    """Fields of the envelope's row record that are not nullable: the key columns.

    The record is defined in `before` or `after`, whichever comes first; the other names it.
    """
    for field in envelope.get("fields", []):
        if field["name"] not in ("before", "after"):
            continue
        types = field["type"] if isinstance(field["type"], list) else [field["type"]]
        for candidate in types:
            if isinstance(candidate, dict) and candidate.get("type") == "record":
                return tuple(
                    f["name"]
                    for f in candidate["fields"]
                    if not (isinstance(f["type"], list) and "null" in f["type"])
                )
    return ()


def _registry(settings: LoaderSettings) -> httpx.Client:
    headers = {"Authorization": f"Bearer {settings.registry_key}"} if settings.registry_key else {}
    return httpx.Client(base_url=settings.registry_url.rstrip("/"), timeout=10, headers=headers)


def _value_topics(http: httpx.Client) -> list[str]:
    try:
        response = http.get("/subjects")
    except httpx.HTTPError as exc:
        raise LoaderError(
            f"Schema registry at {http.base_url} is unreachable: {exc}. "
            "Check HUB_LOADER_REGISTRY_URL."
        ) from exc
    response.raise_for_status()
    return [s.removesuffix("-value") for s in response.json() if s.endswith("-value")]


def _latest(http: httpx.Client, subject: str) -> dict[str, Any] | None:
    response = http.get(f"/subjects/{subject}/versions/latest")
    if response.status_code == 404:
        return None
    response.raise_for_status()
    schema: dict[str, Any] = json.loads(response.json()["schema"])
    return schema
