"""Table and column comments from the Avro docs, so analysts read a table's meaning where it is."""

import json
from typing import Any

from pyspark.sql import SparkSession

from registry.types import SchemaId
from spark_loaders.schemas import RegistryClient

METADATA_DOCS = {
    "_hub_key": "Kafka record key, as published.",
    "_hub_partition": "Kafka partition the record was read from.",
    "_hub_offset": "Kafka offset of the record in its partition.",
    "_hub_timestamp": "Kafka timestamp of the record (its event time when the publisher gave one).",
    "_hub_schema_id": "Registry id of the schema the record was written with.",
    "_hub_ingested_at": "When the loader landed the record.",
    "_hub_ingest_date": "Date the loader landed the record (the partition column).",
}


def docs(schema: Any) -> tuple[str | None, dict[str, str]]:
    """(the record's doc, {top-level field: its doc}) of an Avro record schema."""
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return None, {}
    fields = {f["name"]: f["doc"] for f in schema.get("fields", []) if f.get("doc")}
    return schema.get("doc"), fields


class TableComments:
    """Sets comments once per (table, writer schema) this process has landed."""

    def __init__(self, spark: SparkSession, registry: RegistryClient) -> None:
        self._spark = spark
        self._registry = registry
        self._done: set[tuple[str, SchemaId]] = set()

    def apply(self, table: str, schema_ids: set[SchemaId], columns: list[str]) -> None:
        """Comment `table` from the newest of `schema_ids` not applied yet, and its metadata."""
        new = sorted(i for i in schema_ids if (table, i) not in self._done)
        if not new:
            return
        text = self._registry.schema(new[-1])
        record_doc, field_docs = docs(json.loads(text)) if text else (None, {})
        if record_doc:
            self._spark.sql(f"COMMENT ON TABLE {table} IS {_literal(record_doc)}")
        wanted = {**field_docs, **METADATA_DOCS}
        for column in columns:
            if column in wanted:
                comment = _literal(wanted[column])
                self._spark.sql(f"ALTER TABLE {table} ALTER COLUMN `{column}` COMMENT {comment}")
        self._done.update((table, i) for i in new)


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
