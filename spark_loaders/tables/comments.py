"""Table and column comments from the Avro docs, so analysts read a table's meaning where it is.

A doc is a team's free text: it never goes into SQL. New tables and columns get it in their
schema's metadata (`with_comments`); later changes go to the catalog as `TableChange`s, the
objects `COMMENT ON TABLE` and `ALTER COLUMN ... COMMENT` become after parsing. So no quoting can
break, and no `${env:...}` can be substituted: the table holds the doc as written.
"""

import json
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructField, StructType

from spark_loaders.tables.delta_tables import TableState, alter_table, java_strings, table_changes

METADATA_DOCS = {
    "_hub_key": "Kafka record key, as published.",
    "_hub_partition": "Kafka partition the record was read from.",
    "_hub_offset": "Kafka offset of the record in its partition.",
    "_hub_timestamp": "Kafka timestamp of the record (its event time when the publisher gave one).",
    "_hub_schema_id": "Registry id of the schema the record was written with.",
    "_hub_request_id": "Id of the publish request that wrote the record (null for connectors).",
    "_hub_idempotency_key": "Idempotency-Key of the publish request, when it gave one.",
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
    # The schema is written in Python and handed over whole (`DataFrame.to` carries its
    # metadata over): a column expression with metadata per column took 26-38 ms of the
    # driver's time per batch, this 3.5-5 ms (medians of 15, one session); a `withMetadata`
    # per column, analysing the growing plan each time, took 37-62 ms.
    fields = [
        StructField(f.name, f.dataType, f.nullable, {**f.metadata, "comment": wanted[f.name]})
        if f.name in wanted
        else f
        for f in rows.schema.fields
    ]
    return rows.to(StructType(fields))


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
            set_table_comment(self._spark, table, record_doc)
            state.description = record_doc
        wanted = {**field_docs, **METADATA_DOCS}
        changed = {
            column.name: wanted[column.name]
            for column in state.schema.fields
            if column.name in wanted and column.metadata.get("comment") != wanted[column.name]
        }
        if changed:
            set_column_comments(self._spark, table, changed)
            state.schema = self._spark.read.format("delta").load(state.location).schema
        self._done.add(marker)

    def forget(self, table: str) -> None:
        """Compare again on next use (the table moved to a new location)."""
        self._done = {done for done in self._done if done[0] != table}


def set_table_comment(spark: SparkSession, table: str, comment: str) -> None:
    """`COMMENT ON TABLE table IS comment`, without SQL text: `comment` is stored as given."""
    changes = table_changes(spark)
    alter_table(spark, table, [changes.setProperty("comment", comment)])


def set_column_comments(spark: SparkSession, table: str, comments: dict[str, str]) -> None:
    """Comment top-level columns of `table` ({column: comment}), without SQL text."""
    changes = table_changes(spark)
    alter_table(
        spark,
        table,
        [
            changes.updateColumnComment(java_strings(spark, [c]), text)
            for c, text in comments.items()
        ],
    )
