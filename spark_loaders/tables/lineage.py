"""The loader's side of the lineage ledger (`hub_core.ledger`): the entries its commits carry.

A bronze commit records the Kafka offsets (and, for change events, source LSNs and
transaction ids) it landed, a stream's batch by partition (`bronze_entry`), a replay or a
reprocessing copy by run of consecutive offsets (`landed_entry`); a quarantine commit the
offsets it set aside, by run (`quarantine_entry`); a silver commit records the
bronze versions its batch read, from the stream's own offset log. Each entry travels in the
commit itself (`userMetadata`), so it is exactly once with the data: a batch Delta skips as a
replay commits no entry either.
"""

import json
import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F

from hub_core.ledger import (
    MAX_RANGES,
    MAX_REQUESTS,
    LedgerEntry,
    LedgerKind,
    OffsetRange,
    RequestSpan,
    TableRead,
    joined_ranges,
)
from spark_loaders.runtime import storage
from spark_loaders.runtime.storage import Location

log = logging.getLogger(__name__)

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"


def ledger_session(spark: SparkSession) -> SparkSession:
    """A session of its own for commits whose entry must be set as a session conf outside a
    stream's batch (warehouse builds, `hub load replay`, a reprocessing swap): `spark`'s
    context, catalog and extensions (Delta, the metastore), and its settings (`follow_conf`).

    The loader starts its streams from `spark`, and a query clones its session's conf when it
    starts: an entry set on `spark` would ride along with a stream started meanwhile, and tag
    a concurrent commit of another thread. No stream is ever started from this session.
    """
    session = spark.newSession()
    follow_conf(spark, session)
    return session


def follow_conf(spark: SparkSession, session: SparkSession) -> None:
    """Copy to `session` the settings `spark` has changed at run time (`lock_down`'s, silver's
    schema evolution), which a new session does not inherit; never a ledger entry. The static
    ones (Delta's extension and catalog, the metastore) come from the shared context."""
    for key, value in spark.conf.getAll.items():
        if key != USER_METADATA_CONF and spark.conf.isModifiable(key):
            session.conf.set(key, value)


@contextmanager
def commit_metadata(spark: SparkSession, text: str | None) -> Iterator[None]:
    """Commits made by `spark` inside the block carry `text` as their `userMetadata`.

    For what takes no writer option: MERGE, and CREATE TABLE AS SELECT, which ignores the
    `userMetadata` option. Use the session of a stream's batch (`batch.sparkSession`): each
    streaming query runs on a session of its own, so concurrent queries do not see the value.
    Outside a stream's batch, use a `ledger_session`, never the loader's shared session.
    """
    if text is None:
        yield
        return
    spark.conf.set(USER_METADATA_CONF, text)
    try:
        yield
    finally:
        spark.conf.unset(USER_METADATA_CONF)


def bronze_entry(
    topic: str,
    batch_id: int,
    offsets: Iterable[Any],
    requests: Iterable[Any] = (),
    positions: Iterable[Any] = (),
) -> LedgerEntry:
    """The entry of one topic's bronze commit: `offsets` rows (partition, first, last),
    `requests` rows (partition, request_id, first, last) and, for change events, `positions`
    rows (partition, lsn_min, lsn_max, tx_min, tx_max)."""
    sources = {row["partition"]: row for row in positions}
    ranges = []
    for row in sorted(offsets, key=lambda r: r["partition"]):
        source = sources.get(row["partition"])
        ranges.append(
            OffsetRange(
                row["partition"],
                row["first"],
                row["last"],
                _pair(source, "lsn") if source else None,
                _pair(source, "tx") if source else None,
            )
        )
    spans, omitted = _request_spans(requests)
    return LedgerEntry(
        LedgerKind.BRONZE,
        batch=batch_id,
        topic=topic,
        ranges=tuple(ranges),
        requests=spans,
        requests_omitted=omitted,
    )


def _pair(row: Any, name: str) -> tuple[int, int] | None:
    low, high = row[f"{name}_min"], row[f"{name}_max"]
    return None if low is None or high is None else (int(low), int(high))


def request_spans(records: DataFrame) -> list[Row]:
    """(topic, partition, request_id, first, last) of the published records among `records`."""
    return (
        records.where(F.col("_hub_request_id").isNotNull())
        .groupBy("topic", "partition", F.col("_hub_request_id").alias("request_id"))
        .agg(F.min("offset").alias("first"), F.max("offset").alias("last"))
        .collect()
    )


def source_positions(rows: DataFrame) -> list[Row]:
    """(partition, lsn_min, lsn_max, tx_min, tx_max) of decoded change events; [] for rows
    that are not change events (no `source.lsn`)."""
    source = rows.schema["source"].dataType if "source" in rows.columns else None
    names = set(getattr(source, "fieldNames", lambda: [])())
    if "lsn" not in names:
        return []
    tx = F.col("source.txId") if "txId" in names else F.lit(None).cast("long")
    return (
        rows.groupBy(F.col("_hub_partition").alias("partition"))
        .agg(
            F.min("source.lsn").alias("lsn_min"),
            F.max("source.lsn").alias("lsn_max"),
            F.min(tx).alias("tx_min"),
            F.max(tx).alias("tx_max"),
        )
        .collect()
    )


def landed_entry(topic: str, rows: DataFrame) -> LedgerEntry:
    """The entry of a bronze commit landing `rows` (bronze columns) outside the stream:
    `hub load replay`, a reprocessing rebuild or its swap's copy (`runs_entry`).

    `rows` must be exactly the rows the commit adds (those the table lacks); two small jobs
    read them, one for the runs of offsets and one for publish requests.
    """
    requests: list[Row] = []
    if "_hub_request_id" in rows.columns:
        requests = (
            rows.where(F.col("_hub_request_id").isNotNull())
            .groupBy(
                F.col("_hub_partition").alias("partition"),
                F.col("_hub_request_id").alias("request_id"),
            )
            .agg(F.min("_hub_offset").alias("first"), F.max("_hub_offset").alias("last"))
            .collect()
        )
    return runs_entry(topic, _offset_runs(rows), requests)


def quarantine_entry(topic: str, batch_id: int, rows: DataFrame, *, withheld: bool) -> LedgerEntry:
    """The entry of a quarantine commit of batch `batch_id`: the runs of offsets of the `rows`
    (quarantine columns) it sets aside, found by one small job.

    `withheld`: the rows are records the batch refused (not the batch set aside whole), so
    the batch's bronze commits, whose ranges span them, do not hold them. The entry says so
    only while its ranges are exact, not joined beyond `MAX_RANGES`: the index then leaves
    those bronze commits out of these offsets' answer.
    """
    runs = _offset_runs(rows)
    return replace(
        runs_entry(topic, runs),
        kind=LedgerKind.QUARANTINE,
        batch=batch_id,
        withheld=withheld and len(runs) <= MAX_RANGES,
    )


def _offset_runs(rows: DataFrame) -> list[Row]:
    """(partition, first, last, lsn_min, lsn_max, tx_min, tx_max) of each run of consecutive
    offsets among `rows` (columns `_hub_partition` and `_hub_offset`)."""
    lsn, tx = _source_columns(rows)
    consecutive = Window.partitionBy("partition")
    return (
        rows.select(
            F.col("_hub_partition").alias("partition"),
            F.col("_hub_offset").alias("offset"),
            lsn.alias("lsn"),
            tx.alias("tx"),
        )
        # Offsets minus their rank are equal within a run of consecutive offsets.
        .withColumn("_run", F.col("offset") - F.row_number().over(consecutive.orderBy("offset")))
        .groupBy("partition", "_run")
        .agg(
            F.min("offset").alias("first"),
            F.max("offset").alias("last"),
            F.min("lsn").alias("lsn_min"),
            F.max("lsn").alias("lsn_max"),
            F.min("tx").alias("tx_min"),
            F.max("tx").alias("tx_max"),
        )
        .collect()
    )


def runs_entry(topic: str, runs: Iterable[Any], requests: Iterable[Any] = ()) -> LedgerEntry:
    """The entry of a bronze commit made outside the stream, which has no batch: `runs` rows
    (partition, first, last, lsn_min, lsn_max, tx_min, tx_max), one per run of consecutive
    offsets, become one range each (joined beyond `MAX_RANGES`, `joined_ranges`); `requests`
    rows (partition, request_id, first, last) the publish requests."""
    ranges = joined_ranges(
        OffsetRange(
            int(r["partition"]), int(r["first"]), int(r["last"]), _pair(r, "lsn"), _pair(r, "tx")
        )
        for r in runs
    )
    spans, omitted = _request_spans(requests)
    return LedgerEntry(
        LedgerKind.BRONZE, topic=topic, ranges=ranges, requests=spans, requests_omitted=omitted
    )


def _request_spans(requests: Iterable[Any]) -> tuple[tuple[RequestSpan, ...], int]:
    """`requests` rows (partition, request_id, first, last) as an entry's spans, in offset
    order, the first `MAX_REQUESTS`; and how many were left out."""
    spans = sorted(
        (RequestSpan(r["request_id"], r["partition"], r["first"], r["last"]) for r in requests),
        key=lambda s: (s.partition, s.first, s.request_id),
    )
    return tuple(spans[:MAX_REQUESTS]), max(0, len(spans) - MAX_REQUESTS)


def _source_columns(rows: DataFrame) -> tuple[Column, Column]:
    """The source LSN and transaction id of change-event rows; nulls for other rows."""
    source = rows.schema["source"].dataType if "source" in rows.columns else None
    names = set(getattr(source, "fieldNames", lambda: [])())
    none = F.lit(None).cast("long")
    if "lsn" not in names:
        return none, none
    return F.col("source.lsn"), F.col("source.txId") if "txId" in names else none


def stream_read(
    spark: SparkSession, checkpoint: Location, batch_id: int, table: str
) -> TableRead | None:
    """The versions of Delta table `table` that batch `batch_id` of a stream read, from the
    stream's offset log (`<checkpoint>/offsets/<batch>`, written before the batch runs).

    A Delta source offset is (reservoirVersion, index): index -1 means no file of that version
    read yet. The first batch of a stream reads the snapshot, every version up to its end.
    The range may include a version that added no rows the batch read; it never misses one.
    The offset's `reservoirId` is the id of the Delta table read, which the read names.
    """
    end = _delta_offset(spark, checkpoint, batch_id)
    start = _delta_offset(spark, checkpoint, batch_id - 1) if batch_id > 0 else None
    if end is None:  # not run by a stream (a test applying a batch by hand)
        return None
    end_version = int(end["reservoirVersion"])
    last = end_version - 1 if int(end.get("index", -1)) == -1 else end_version
    if start is None or (start.get("isStartingVersion") and batch_id == 0):
        first = 0
    else:
        first = int(start["reservoirVersion"])
    if end.get("isStartingVersion"):
        first, last = 0, end_version
    reservoir = end.get("reservoirId")
    return TableRead(
        table, first, max(first, last), reservoir if isinstance(reservoir, str) else None
    )


def delta_table_id(spark: SparkSession, table: str) -> str | None:
    """The Delta table id (`metaData.id`) of `table`, None when it does not exist.

    A reprocessing swap points a bronze table's name at a new Delta table, with a new id and
    its versions numbered from 0 again: the id tells which one a version number belongs to.
    """
    found = _delta_detail(spark, table)
    return None if found is None else found[0]


def _delta_detail(spark: SparkSession, table: str) -> tuple[str, str] | None:
    """`table`'s Delta id and folder, from `DESCRIBE DETAIL`; None when it is no Delta table."""
    if not spark.catalog.tableExists(table):
        return None
    detail = DeltaTable.forName(spark, table).detail().select("id", "location").head()
    if detail is None or detail[0] is None:
        return None
    return str(detail[0]), _folder(str(detail[1]))


class TableIds:
    """The Delta table ids of tables by name, for callers that ask often (each gold build).

    `DESCRIBE DETAIL`, which names the id, also sizes the table: about 0.4 s on a table being
    written, against a few milliseconds to ask the metastore where the table lives. A table's
    id changes only with its location (a reprocessing swap), so the id is read once per
    location, and the location is asked each time.
    """

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._by_location: dict[str, str] = {}

    def location(self, table: str) -> str | None:
        """Where the metastore says `table` lives now; None when it does not exist."""
        if not self._spark.catalog.tableExists(table):
            return None
        jvm: Any = self._spark.sparkContext._jvm
        database, _, name = table.rpartition(".")
        identifier = jvm.org.apache.spark.sql.catalyst.TableIdentifier.apply(
            name, jvm.scala.Option.apply(database or None)
        )
        catalog = self._spark._jsparkSession.sessionState().catalog()
        return _folder(str(catalog.getTableMetadata(identifier).location()))

    def id_at(self, table: str, location: str) -> str | None:
        """The id of `table`, which lives at `location`; None when it is no Delta table (or
        has moved since: then the caller asks again)."""
        known = self._by_location.get(location)
        if known is not None:
            return known
        found = _delta_detail(self._spark, table)
        if found is None:
            return None
        table_id, folder = found
        self._by_location[folder] = table_id
        return self._by_location.get(location)


def _folder(location: str) -> str:
    return location.rstrip("/")


def checkpoint_table_id(spark: SparkSession, checkpoint: Location) -> str | None:
    """The id of the Delta table the stream of `checkpoint` reads, from its newest offset
    (`reservoirId`); None before its first batch."""
    folder = checkpoint / "offsets"
    if isinstance(folder, Path):
        names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
    else:
        names = storage.HadoopFiles(spark).names(str(folder))
    batches = sorted(int(name) for name in names if name.isdigit())
    if not batches:
        return None
    offset = _delta_offset(spark, checkpoint, batches[-1])
    reservoir = None if offset is None else offset.get("reservoirId")
    return reservoir if isinstance(reservoir, str) else None


def _delta_offset(
    spark: SparkSession, checkpoint: Location, batch_id: int
) -> dict[str, Any] | None:
    path = checkpoint / "offsets" / str(batch_id)
    try:
        if not storage.exists(spark, path):
            return None
        lines = storage.read_text(spark, path).splitlines()
    except Exception:  # the ledger must never fail a batch
        log.warning("could not read the offset log %s", path, exc_info=True)
        return None
    # "v1", the batch's metadata, then one offset per source (silver has one).
    for line in lines[2:]:
        if line.strip().startswith("{"):
            offset = json.loads(line)
            if "reservoirVersion" in offset:
                return cast(dict[str, Any], offset)
    return None
