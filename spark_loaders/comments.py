"""Table and column comments from the Avro docs, so analysts read a table's meaning where it is."""

import json
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from spark_loaders.tables import TableState

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


def with_comments(rows: DataFrame, schema_text: str | None) -> DataFrame:
    """`rows` with the Avro docs as column comments in their schema's metadata.

    A table created, or a column added, from such rows gets its comments in the same Delta
    commit, instead of one ALTER COLUMN commit per column afterwards.
    """
    _, field_docs = docs(json.loads(schema_text)) if schema_text else (None, {})
    wanted = {**field_docs, **METADATA_DOCS}
    for column in rows.columns:
        if column in wanted:
            rows = rows.withMetadata(column, {"comment": wanted[column]})
    return rows


class TableComments:
    """Sets comments that differ from what the table has; each change is a Delta commit, so
    nothing is re-applied when a loader restarts or a batch brings no new schema."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._done: set[tuple[str, str]] = set()

    def apply(self, table: str, schema_text: str | None, state: TableState) -> None:
        """Comment `table` and its columns from the Avro docs of `schema_text`."""
        marker = (table, schema_text or "")
        if marker in self._done:
            return
        record_doc, field_docs = docs(json.loads(schema_text)) if schema_text else (None, {})
        if record_doc and record_doc != state.description:
            self._spark.sql(f"COMMENT ON TABLE {table} IS {_literal(record_doc)}")
            state.description = record_doc
        wanted = {**field_docs, **METADATA_DOCS}
        changed = False
        for column in state.schema.fields:
            comment = wanted.get(column.name)
            if comment is not None and column.metadata.get("comment") != comment:
                self._spark.sql(
                    f"ALTER TABLE {table} ALTER COLUMN `{column.name}` COMMENT {_literal(comment)}"
                )
                changed = True
        if changed:
            state.schema = self._spark.read.format("delta").load(state.location).schema
        self._done.add(marker)

    def forget(self, table: str) -> None:
        """Compare again on next use (the table moved to a new location)."""
        self._done = {done for done in self._done if done[0] != table}


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
