"""Rebuilding a bronze table from Kafka and swapping it in while the stream keeps landing.

`build` reads the topic from its earliest retained offset to its current end with a batch
query, decodes it like the stream does, and writes a new Delta location; the old table serves
readers all the while. It then leaves a swap request. The running bronze loader applies the
request at the start of a micro-batch, where it is the table's only writer:

1. copy the rows the stream landed past the build's end offsets from the old location into the
   new one (skipping rows already there, so a repeat after a crash copies nothing twice);
2. `ALTER TABLE ... SET LOCATION` the new location: one metastore update, atomic for readers;
3. land that batch, and any replay of it or of the batch before it, by inserting only rows
   whose (partition, offset) is not in the table yet: those batches may already be in the copy.

The request is deleted once a later batch starts, when the swap batch is committed in the
checkpoint. See docs/adr (reprocessing by location swap).

Lineage: the rebuild's commit and the copy's each carry a ledger entry naming the offsets they
land (`lineage.landed_entry`); the copy's is computed from the rows the new location lacks, so
a copy repeated after a crash commits nothing and adds no entry. Once swapped in, the new
location is marked (`hub_core.ledger.SWAPPED_IN`), so that the API's lineage index, which reads
Delta logs without the metastore, follows the table there.
"""

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from hub_core.ledger import SWAPPED_IN
from hub_core.naming import TopicName, bronze_table, table_suffix, value_subject
from hub_kafka.security import spark_options
from hub_kafka.settings import KafkaSettings
from registry.types import SchemaId
from spark_loaders.bronze.decode import decode_topic, with_schema_id
from spark_loaders.bronze.ingestion import IngestionTime
from spark_loaders.bronze.kafka_access import check_kafka_access
from spark_loaders.bronze.schemas import RegistryClient
from spark_loaders.errors import LoaderError, LoaderSourceNotFound
from spark_loaders.runtime import storage
from spark_loaders.runtime.storage import Location, RemoteLocation
from spark_loaders.runtime.work_progress import WorkProgress, no_progress
from spark_loaders.settings import LoaderSettings
from spark_loaders.tables.delta_tables import (
    PARTITION_COLUMN,
    TYPE_WIDENING,
    DeltaTables,
    stamp_feeds,
)
from spark_loaders.tables.lineage import commit_metadata, landed_entry, ledger_session

log = logging.getLogger(__name__)

_BYPASS_SCHEMA_CHECK = "spark.databricks.delta.alterLocation.bypassSchemaCheck"
_KEY = "t._hub_partition = s._hub_partition AND t._hub_offset = s._hub_offset"
_KEY_COLUMNS = ("_hub_partition", "_hub_offset")
# Reading the topic, decoding it, writing the rebuild, counting the rows written.
_BUILD_STEPS = 4


@dataclass
class SwapRequest:
    """A rebuilt location waiting to replace a table's current one."""

    topic: str
    table: str
    location: str
    end_offsets: dict[str, int]  # partition -> last offset in the rebuild
    rows: int
    merge_through: int | None = None  # set once applied: batches up to it insert missing rows


@dataclass(frozen=True, slots=True)
class BuildResult:
    request: SwapRequest
    request_file: Path


def build(
    spark: SparkSession,
    settings: LoaderSettings,
    kafka: KafkaSettings,
    topic: str,
    *,
    progress: WorkProgress = no_progress,
) -> BuildResult:
    """Rebuild `bronze.<topic>` into a new location and leave a swap request for the loader.

    `progress` hears of its four steps: reading the topic, decoding, writing, counting.
    """
    table = bronze_table(TopicName(topic))
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    location = settings.warehouse_dir / "_rebuilds" / table_suffix(TopicName(topic)) / stamp
    progress(f"reading {topic} from Kafka", 0, _BUILD_STEPS)
    check_kafka_access(spark, kafka)
    records = with_schema_id(
        spark.read.format("kafka")
        .options(**spark_options(kafka))
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("kafka.isolation.level", "read_committed")
        .load()
    ).persist()
    try:
        summary = records.groupBy("_hub_schema_id", "partition").agg(
            F.count("*").alias("count"), F.max("offset").alias("last")
        )
        found = summary.collect()
        if not found:
            raise LoaderSourceNotFound(
                f"Topic {topic} has no records to rebuild {table} from (or does not exist): "
                "check the topic name and HUB_KAFKA_BOOTSTRAP_SERVERS."
            )
        ids = {SchemaId(r["_hub_schema_id"]) for r in found if r["_hub_schema_id"] is not None}
        end_offsets: dict[str, int] = {}
        for row in found:
            key = str(row["partition"])
            end_offsets[key] = max(end_offsets.get(key, -1), int(row["last"]))
        count = sum(int(r["count"]) for r in found)
        progress(f"decoding {count} records of {topic}", 1, _BUILD_STEPS)
        registry = RegistryClient(settings.registry_url, api_key=settings.registry_key)
        decoded = decode_topic(
            records,
            subject=value_subject(TopicName(topic)),
            schema_ids=ids,
            unframed=any(r["_hub_schema_id"] is None for r in found),
            registry=registry,
        )
        registry.close()
        if decoded.landed is None:
            raise LoaderSourceNotFound(
                f"No record of {topic} decodes with its registered schemas; nothing to rebuild "
                f"{table} from. See quarantine.{table_suffix(TopicName(topic))} for reasons."
            )
        rows = decoded.landed.withColumns(IngestionTime.now().columns())
        log.info(
            "rebuilding %s from %d partitions of %s into %s",
            table,
            len(end_offsets),
            topic,
            location,
        )
        progress(f"writing the rebuild of {table} from {count} records", 2, _BUILD_STEPS)
        entry = landed_entry(topic, rows)
        (
            rows.write.format("delta")
            .mode("errorifexists")
            .partitionBy(PARTITION_COLUMN)
            .option(TYPE_WIDENING, "true")
            .option("userMetadata", entry.encode())
            .save(str(location))
        )
        progress(f"counting the rows of the rebuild of {table}", 3, _BUILD_STEPS)
        written = spark.read.format("delta").load(str(location)).count()
    finally:
        records.unpersist()
    progress(f"rebuilt {table}: {written} rows", _BUILD_STEPS, _BUILD_STEPS)
    request = SwapRequest(topic, table, str(location), end_offsets, written)
    path = SwapRequests(settings.state_dir).put(request)
    return BuildResult(request, path)


def current_location(settings: LoaderSettings, topic: str) -> Path:
    """Where `bronze.<topic>` lives without asking the metastore: its newest swapped-in
    rebuild, or the managed location under the warehouse.

    Local warehouses only: without Spark there is no listing a bucket, and the callers read
    the table's Delta log as local files.
    """
    if not isinstance(settings.warehouse_dir, Path):
        raise LoaderError(
            f"The warehouse is on object storage ({settings.warehouse_dir}): give the bronze "
            "table's folder explicitly (a local copy of it, e.g. `--table-location`)."
        )
    return bronze_location(settings, settings.warehouse_dir, table_suffix(TopicName(topic)))


def bronze_location(settings: LoaderSettings, warehouse: Path, suffix: str) -> Path:
    """Where the bronze table `bronze.<suffix>` of a local `warehouse` lives: its newest
    swapped-in rebuild, or its managed folder."""
    pending = {
        r.location for r in SwapRequests(settings.state_dir).list() if r.merge_through is None
    }
    rebuilds = warehouse / "_rebuilds" / suffix
    done = (
        [p for p in sorted(rebuilds.glob("*")) if str(p) not in pending]
        if rebuilds.is_dir()
        else []
    )
    return done[-1] if done else warehouse / "bronze.db" / suffix


def land_missing(spark: SparkSession, rows: DataFrame, location: str, *, topic: str) -> None:
    """Insert the rows of `topic` whose (partition, offset) the bronze table at `location`
    lacks, in one commit whose ledger entry names exactly them; none when it lacks none.

    `spark` must be a `lineage.ledger_session`: the entry is set as its conf around the MERGE.
    """
    held = spark.read.format("delta").load(location).select(*_KEY_COLUMNS)
    missing = rows.join(held, list(_KEY_COLUMNS), "left_anti").persist()
    try:
        entry = landed_entry(topic, missing)
        if not entry.ranges:
            return
        with commit_metadata(spark, entry.encode()):
            insert_missing(spark, missing, location)
    finally:
        missing.unpersist()


def insert_missing(spark: SparkSession, rows: DataFrame, location: str) -> None:
    """Insert the rows whose (partition, offset) the Delta table at `location` lacks.

    The MERGE commits on the session of `rows`, not on `spark`: Delta takes the commit's
    ledger entry from the conf of the session the table was opened on, and callers set it on
    the session their rows come from (a stream's batch, a `lineage.ledger_session`), never on
    the loader's shared `spark`. Both are sessions of the same application.
    """
    from delta.tables import DeltaTable

    unique = rows.dropDuplicates(["_hub_partition", "_hub_offset"])
    (
        DeltaTable.forPath(rows.sparkSession, location)
        .alias("t")
        .merge(unique.alias("s"), _KEY)
        .withSchemaEvolution()
        .whenNotMatchedInsertAll()
        .execute()
    )


class SwapRequests:
    """Swap requests as small JSON files next to the loader's checkpoints."""

    def __init__(self, checkpoint_dir: Path) -> None:
        self._dir = checkpoint_dir / "swaps"

    def put(self, request: SwapRequest) -> Path:
        """Store a request (replacing an older one for the same table)."""
        self._dir.mkdir(parents=True, exist_ok=True)
        path = self._dir / f"{request.table}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(request)))
        tmp.replace(path)
        return path

    def list(self) -> list[SwapRequest]:
        """Every stored request."""
        if not self._dir.is_dir():
            return []
        return [SwapRequest(**json.loads(p.read_text())) for p in sorted(self._dir.glob("*.json"))]

    def apply_pending(
        self,
        spark: SparkSession,
        tables: DeltaTables,
        *,
        batch_id: int,
        app_id: str,
        on_swapped: Callable[[SwapRequest], None] = lambda request: None,
    ) -> dict[str, int]:
        """Apply requests not applied yet; return {table: last batch id to land by merge}.

        `on_swapped` hears of each swap before the request is marked applied: after a crash
        in between, the swap and the call are repeated, both harmlessly.
        """
        merge_through: dict[str, int] = {}
        for request in self.list():
            if request.merge_through is None:
                swap(spark, tables, request)
                on_swapped(request)
                request.merge_through = batch_id
                self.put(request)
            merge_through[request.table] = request.merge_through
        return merge_through

    def settle(self, batch_id: int) -> None:
        """Forget requests whose swap batch is surely committed (a later batch has run)."""
        for request in self.list():
            if request.merge_through is not None and batch_id > request.merge_through:
                (self._dir / f"{request.table}.json").unlink(missing_ok=True)


def swap(spark: SparkSession, tables: DeltaTables, request: SwapRequest) -> None:
    """Copy rows landed past the rebuild into it, then point the table at it."""
    state = tables.state(request.table)
    if state is None:
        spark.sql(f"CREATE TABLE {request.table} USING DELTA LOCATION '{request.location}'")
    elif state.location.rstrip("/") != _uri(request.location):
        # The copy's ledger entry is a session conf: not of `spark`, the loader's shared session.
        session = ledger_session(spark)
        old = session.read.format("delta").load(state.location)
        beyond = F.lit(True)
        for partition, last in request.end_offsets.items():
            beyond = beyond & ~(
                (F.col("_hub_partition") == int(partition)) & (F.col("_hub_offset") <= last)
            )
        land_missing(session, old.where(beyond), request.location, topic=request.topic)
        # A rebuild may rightly differ in schema (it is decoded with today's schema).
        spark.conf.set(_BYPASS_SCHEMA_CHECK, "true")
        try:
            spark.sql(f"ALTER TABLE {request.table} SET LOCATION '{request.location}'")
        finally:
            spark.conf.unset(_BYPASS_SCHEMA_CHECK)
        log.info("%s now reads %s (was %s)", request.table, request.location, state.location)
    # The rebuild's Delta log is new: it carries the feed again before anyone reads it.
    stamp_feeds(spark, request.table, [request.topic])
    storage.write_text(spark, _location(request.location) / SWAPPED_IN, request.table)
    tables.forget(request.table)


def _location(location: str) -> Location:
    return RemoteLocation(location) if "://" in location else Path(location)


def _uri(location: str) -> str:
    return location if ":" in location.split("/", 1)[0] else f"file:{location}"
