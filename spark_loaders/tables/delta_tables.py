"""The loader's Delta tables: created once through the metastore, then written by path.

Resolving a table in the metastore on every micro-batch costs metastore round trips and a
Delta snapshot per write; the loader is the only writer of its tables, so it looks a table up
once, keeps its location and columns, and appends to the location. A reprocessing swap
(`spark_loaders.bronze.reprocess`) is done by the loader itself and updates what is kept here.
"""

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from py4j.java_gateway import JavaObject
from pyspark.sql import DataFrame, DataFrameWriter, SparkSession
from pyspark.sql.types import StructType

from spark_loaders.tables.evolution import ChangeKind, ColumnChange, diff, spark_columns
from spark_loaders.tables.lineage import commit_metadata
from spark_loaders.tables.maintenance import new_table_properties

log = logging.getLogger(__name__)

PARTITION_COLUMN = "_hub_ingest_date"
TYPE_WIDENING = "delta.enableTypeWidening"
# The feeds a table's rows come from, as comma-separated topics: the analysts' server lets a
# team read the table only when it may read every one of them (docs/security.md, read grants).
FEEDS_PROPERTY = "hub.feeds"


@dataclass
class TableState:
    """What the loader knows of one of its tables."""

    location: str
    schema: StructType
    description: str | None
    type_widening: bool
    feeds: str | None = None  # the table's `hub.feeds`


class DeltaTables:
    """Creates, evolves and appends to the loader's tables, idempotently per (app id, batch)."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._known: dict[str, TableState] = {}

    def state(self, table: str) -> TableState | None:
        """The table's location and columns, or None when it does not exist yet."""
        if table in self._known:
            return self._known[table]
        if not self._spark.catalog.tableExists(table):
            return None
        # The table's properties as its catalog (Delta's) gives them: Delta's table properties,
        # its `location` and its `comment`, from the newest snapshot's metadata. `DESCRIBE
        # DETAIL` says the same and also sizes the table, which took 0.4-0.5 s of a loader's
        # first batch per table (three Spark jobs), against 0.02-0.03 s.
        properties = catalog_properties(self._spark, table)
        location = properties["location"]
        state = TableState(
            location=location,
            schema=self._spark.read.format("delta").load(location).schema,
            description=properties.get("comment"),
            type_widening=properties.get(TYPE_WIDENING) == "true",
            feeds=properties.get(FEEDS_PROPERTY),
        )
        self._known[table] = state
        return state

    def forget(self, table: str) -> None:
        """Look the table up again on next use (after its location changed)."""
        self._known.pop(table, None)

    def evolve(self, table: str, incoming: StructType) -> list[ColumnChange]:
        """Prepare `table` for rows of `incoming` columns; return the changes it cannot take.

        Added columns and automatic widenings are applied by the append (mergeSchema);
        int -> double needs an ALTER COLUMN first, run here. An empty list means: append.
        """
        state = self.state(table)
        if state is None:
            return []
        if not state.schema.fields:  # not read since the table was created or changed
            state.schema = self._spark.read.format("delta").load(state.location).schema
        changes = diff(spark_columns(state.schema.jsonValue()), spark_columns(incoming.jsonValue()))
        refused = [c for c in changes if not c.applicable]
        if refused:
            return refused
        widenings = [c for c in changes if c.kind.name.startswith("WIDEN_TYPE")]
        if widenings and not state.type_widening:
            self._spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('{TYPE_WIDENING}' = 'true')")
            state.type_widening = True
        for change in changes:
            if change.kind is ChangeKind.WIDEN_TYPE_BY_ALTER:
                column = _sql_path(change.column)
                log.info("widening %s.%s to %s", table, change.column, change.new_type)
                self._spark.sql(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE {change.new_type}")
        if any(c.kind is not ChangeKind.COLUMN_NOT_WRITTEN for c in changes):
            for change in changes:
                log.info("%s: %s", table, change.describe())
            # Re-read after the append that applies them.
            state.schema = StructType()
        return []

    def append(
        self,
        rows: DataFrame,
        table: str,
        *,
        app_id: str,
        version: int,
        partitioned: bool,
        feed: str,
        metadata: str | None = None,
    ) -> None:
        """Append with Delta's idempotent writes: a repeat of (app_id, version) is skipped.

        `feed` is the topic the rows come from: the table carries it as `hub.feeds`, set when
        the table is created and on the first append to a table that lacks it. `metadata`
        becomes the commit's `userMetadata` (the lineage ledger entry): a skipped repeat
        commits none.
        """
        writer = (
            rows.write.format("delta")
            .mode("append")
            .option("mergeSchema", "true")
            .option("txnAppId", app_id)
            .option("txnVersion", version)
        )
        state = self.state(table)
        if state is None:
            if partitioned:
                writer = writer.partitionBy(PARTITION_COLUMN)
            writer = writer.options(**new_table_properties(self._spark, table))
            # CREATE TABLE AS SELECT ignores the `userMetadata` option; it takes the conf.
            with commit_metadata(rows.sparkSession, metadata):
                save_as_new_table(self._spark, writer.option(TYPE_WIDENING, "true"), table)
            log.info("created table %s", table)
            # What the table was just created with: asking the metastore and Delta for its
            # details (DESCRIBE DETAIL sizes the table) took seconds per new table.
            # Its columns are read when next needed (`evolve`): here they would cost a
            # snapshot of the new table, for a catch-up batch that may be the only one.
            stamp_feeds(self._spark, table, [feed])
            self._known[table] = TableState(
                location=default_location(self._spark, table),
                schema=StructType(),
                description=None,
                type_widening=True,
                feeds=feed,
            )
            return
        if state.feeds != feed:
            state.feeds = stamp_feeds(self._spark, table, [feed], current=state.feeds)
        if metadata is not None:
            writer = writer.option("userMetadata", metadata)
        writer.save(state.location)
        if not state.schema.fields:
            state.schema = self._spark.read.format("delta").load(state.location).schema


def save_as_new_table(spark: SparkSession, writer: DataFrameWriter, table: str) -> None:
    """Create the managed table `table` with `writer`, after clearing what an interrupted
    creation of it may have left (`clear_interrupted_creation`)."""
    clear_interrupted_creation(spark, table)
    writer.saveAsTable(table)


def clear_interrupted_creation(spark: SparkSession, table: str) -> str | None:
    """Move aside the files an interrupted creation of `table` left; return where they went.

    Creating a managed Delta table writes its files, commits, and only then registers the
    table in the metastore. A loader killed before the registration leaves files at the
    table's default location, and Delta never creates a managed table over a location that is
    not empty (DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION): the table could not be created
    again, and its feed would stop for good. No reader saw those files, since the table was
    never registered, and the batch that wrote them is run again from its checkpoint, so they
    are renamed to `<location>.interrupted-<UTC time>`, kept for inspection, not deleted.

    Call it only for a table the catalog does not know. The Hadoop file system API makes it
    work for local and object storage alike.
    """
    location = default_location(spark, table)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(location)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(path) or len(fs.listStatus(path)) == 0:
        return None
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    aside = jvm.org.apache.hadoop.fs.Path(f"{location}.interrupted-{stamp}")
    if not fs.rename(path, aside):
        raise RuntimeError(f"could not move {path} aside to {aside}")
    log.warning(
        "%s was not in the metastore, but files were at its location: an earlier creation "
        "was interrupted. They were moved to %s, and the table is created again.",
        table,
        aside,
    )
    return str(aside)


def stamp_feeds(
    spark: SparkSession, table: str, topics: Iterable[str], *, current: str | None = None
) -> str:
    """Set `table`'s `hub.feeds` to `topics` unless it holds them already; return the value.

    `current` is the value when the caller knows it; otherwise it is read from the table. A
    change is a Delta commit of the table's metadata, made only when the value differs.
    """
    wanted = ",".join(sorted(set(topics)))
    if current is None:
        current = catalog_properties(spark, table).get(FEEDS_PROPERTY)
    if current != wanted:
        alter_table(spark, table, [table_changes(spark).setProperty(FEEDS_PROPERTY, wanted)])
        log.info("%s: %s = %s", table, FEEDS_PROPERTY, wanted)
    return wanted


_STAMPED: set[tuple[str, str]] = set()


def stamp_feeds_once(spark: SparkSession, table: str, topics: Iterable[str]) -> None:
    """`stamp_feeds`, read and compared once per process for a table and value: for tables
    built again and again (gold), whose feeds change only with their model."""
    marker = (table, ",".join(sorted(set(topics))))
    if marker not in _STAMPED:
        stamp_feeds(spark, table, topics)
        _STAMPED.add(marker)


def table_changes(spark: SparkSession) -> Any:
    """Spark's `TableChange` class, whose static methods make the changes `alter_table` takes."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None, "the session has no JVM"
    return jvm.org.apache.spark.sql.connector.catalog.TableChange


def alter_table(spark: SparkSession, table: str, changes: list[JavaObject]) -> None:
    """Apply `changes` to `table` (`db.name`) through the session catalog (Delta's, for Delta
    tables), as the ALTER TABLE statements would after parsing: no SQL text, so no value can
    break out of its quotes."""
    gateway, jvm = spark.sparkContext._gateway, spark.sparkContext._jvm
    assert gateway is not None and jvm is not None, "the session has no JVM"
    array = gateway.new_array(jvm.org.apache.spark.sql.connector.catalog.TableChange, len(changes))
    for index, change in enumerate(changes):
        array[index] = change
    session_catalog(spark).alterTable(catalog_identifier(spark, table), array)


def catalog_properties(spark: SparkSession, table: str) -> dict[str, str]:
    """The properties of `table` (`db.name`) as the session catalog loads it: for a Delta
    table, its Delta properties plus `location`, `provider`, `owner` and `comment`."""
    return dict(session_catalog(spark).loadTable(catalog_identifier(spark, table)).properties())


def session_catalog(spark: SparkSession) -> JavaObject:
    """The session's catalog as the V2 API sees it (Delta's `DeltaCatalog`, for Delta)."""
    return spark._jsparkSession.sessionState().catalogManager().catalog("spark_catalog")


def catalog_identifier(spark: SparkSession, table: str) -> JavaObject:
    """The V2 catalog's `Identifier` of `table` (`db.name`)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None, "the session has no JVM"
    *namespace, name = table.split(".")
    return jvm.org.apache.spark.sql.connector.catalog.Identifier.of(
        java_strings(spark, namespace), name
    )


def java_strings(spark: SparkSession, values: list[str]) -> JavaObject:
    """`values` as a Java `String[]`."""
    gateway, jvm = spark.sparkContext._gateway, spark.sparkContext._jvm
    assert gateway is not None and jvm is not None, "the session has no JVM"
    array = gateway.new_array(jvm.java.lang.String, len(values))
    for index, value in enumerate(values):
        array[index] = value
    return array


def default_location(spark: SparkSession, table: str) -> str:
    """Where the metastore puts managed table `table`: its database's location, then the
    table's name in lower case."""
    database, _, name = table.rpartition(".")
    base = spark.catalog.getDatabase(database or "default").locationUri.rstrip("/")
    return f"{base}/{name.lower()}"


def _sql_path(column: str) -> str:
    """`a.b[]` -> `a`.`b`.`element`: a nested column as ALTER TABLE names it."""
    parts = []
    for part in column.split("."):
        suffix: list[str] = []
        while part.endswith(("[]", "{}")):
            suffix.insert(0, "element" if part.endswith("[]") else "value")
            part = part[:-2]
        parts.append(part)
        parts.extend(suffix)
    return ".".join(f"`{p}`" for p in parts)
