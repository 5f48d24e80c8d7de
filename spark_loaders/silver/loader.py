"""Silver tables of changelog topics: `<t>_history` (SCD type 2) and `<t>_current` (SCD type 1).

One Delta stream per changelog bronze table. Each micro-batch recomputes the timeline of the keys
it touches (see `changes`) and MERGEs it into history, then MERGEs each touched key's last
version into current. Both MERGEs match on what a row is (key and source position; key), never
on the batch, so a batch replayed after a crash rewrites identical values: exactly once without
`txnVersion`, which could not protect two tables in two commits anyway.
"""

import contextlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from hub_core.ledger import LedgerEntry, LedgerKind
from spark_loaders.errors import LoaderError
from spark_loaders.runtime.isolation import FailureKind, classify, describe
from spark_loaders.runtime.storage import Location, parse_location
from spark_loaders.settings import LoaderSettings
from spark_loaders.silver.changes import (
    _DROP,
    IS_CURRENT,
    IS_DELETED,
    LSN,
    OP,
    POSITION,
    TX_ID,
    VALID_FROM,
    VALID_TO,
    ChangelogSpec,
    events,
    row_fields,
    timeline,
    truncate_markers,
)
from spark_loaders.silver.keys import discover
from spark_loaders.tables.comments import set_table_comment
from spark_loaders.tables.delta_tables import (
    FEEDS_PROPERTY,
    catalog_properties,
    save_as_new_table,
    stamp_feeds,
)
from spark_loaders.tables.lineage import (
    checkpoint_table_id,
    commit_metadata,
    delta_table_id,
    stream_read,
)
from spark_loaders.tables.maintenance import new_table_properties
from spark_loaders.tables.merges import detached, without_unchanged
from spark_loaders.tables.openlineage import RunEvents, run_events

log = logging.getLogger(__name__)

CURRENT_DROPPED = (VALID_TO, IS_CURRENT, IS_DELETED, "_hub_unavailable")


class SilverLoader:
    """Keeps `silver.<t>_current` and `silver.<t>_history` of one changelog topic up to date."""

    def __init__(
        self,
        spark: SparkSession,
        spec: ChangelogSpec,
        *,
        checkpoint_dir: str,
        events: RunEvents | None = None,
    ) -> None:
        self._spark = spark
        self._events = events
        self._spec = spec
        self._feeds_stamped = False
        self._base_checkpoint = f"{checkpoint_dir}/hub-silver-{spec.silver_prefix.split('.')[-1]}"
        self._use_checkpoint(self._base_checkpoint)
        # New row columns in bronze reach silver through MERGE's schema evolution.
        spark.conf.set("spark.databricks.delta.schema.autoMerge.enabled", "true")

    @property
    def spec(self) -> ChangelogSpec:
        return self._spec

    def start(self, *, available_now: bool = False, trigger_seconds: float = 1.0) -> StreamingQuery:
        """Follow the bronze table; with `available_now`, stop once caught up."""
        self._ensure_tables()
        self._follow_rebuilt_bronze()
        writer = (
            self._spark.readStream.format("delta")
            .table(self._spec.bronze_table)
            .writeStream.queryName(f"hub-silver-{self._spec.silver_prefix}")
            .foreachBatch(self.apply)
            .option("checkpointLocation", self._checkpoint)
        )
        if available_now:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
        log.info(
            "following %s into %s and %s",
            self._spec.bronze_table,
            self._spec.current_table,
            self._spec.history_table,
        )
        return writer.start()

    def _use_checkpoint(self, checkpoint: str) -> None:
        self._checkpoint = checkpoint
        parsed = parse_location(checkpoint)
        self._checkpoint_location: Location = (
            Path(parsed) if isinstance(parsed, str) else cast(Location, parsed)
        )

    def _follow_rebuilt_bronze(self) -> None:
        """Read a bronze table that a reprocessing swap replaced from a checkpoint of its own.

        The swap points the bronze table's name at a new Delta table, with a new id and its
        versions numbered from 0 again (ADR 0015), and a Delta stream refuses to go on from
        offsets of another table. The stream then reads the rebuilt table from its start,
        from a checkpoint named by its id (`hub-silver-<t>-<table id>`); silver's MERGEs,
        which match on what a row is, make rows read again change nothing. A stream whose
        checkpoint reads the current table keeps it, so one that never saw a swap is unchanged.
        """
        bronze = delta_table_id(self._spark, self._spec.bronze_table)
        self._use_checkpoint(self._base_checkpoint)
        read = checkpoint_table_id(self._spark, self._checkpoint_location)
        if bronze is None or read is None or read == bronze:
            return
        self._use_checkpoint(f"{self._base_checkpoint}-{bronze}")
        log.warning(
            "%s is a rebuilt table now (id %s; the stream read %s): silver reads it from its "
            "start, from checkpoint %s",
            self._spec.bronze_table,
            bronze,
            read,
            self._checkpoint,
        )

    def apply(self, batch: DataFrame, batch_id: int) -> None:
        """Apply one batch of bronze rows to history, then current; replaying it is a no-op."""
        spec = self._spec
        keys = list(spec.key_columns)
        new = events(batch, spec).persist()
        try:
            if new.isEmpty():
                return
            if not self._feeds_stamped:
                self._stamp_feeds()
            columns = [c for c in row_fields(batch.schema) if c not in keys]
            # Both MERGEs carry which bronze versions the batch read (the lineage ledger). A
            # replayed batch changes nothing, and a MERGE given nothing to change is not run.
            # The batch's session is the stream's own, so the setting stays with this stream.
            session = batch.sparkSession
            read = stream_read(session, self._checkpoint_location, batch_id, spec.bronze_table)
            entry = LedgerEntry(LedgerKind.SILVER, batch=batch_id, reads=(read,)) if read else None
            run = (
                self._events.run(
                    f"hub-silver-{spec.silver_prefix}",
                    read_tables=[spec.bronze_table],
                    tables=[spec.history_table, spec.current_table],
                )
                if self._events is not None
                else contextlib.nullcontext()
            )
            with run, commit_metadata(session, entry.encode() if entry else None):
                changed = self._apply_history(new, keys, columns, session)
                self._apply_current(changed, keys, session)
            log.info(
                "batch %d of %s: %d events applied to %s and %s",
                batch_id,
                spec.bronze_table,
                new.count(),
                spec.history_table,
                spec.current_table,
            )
        finally:
            new.unpersist()

    def _apply_history(
        self, new: DataFrame, keys: list[str], columns: list[str], session: SparkSession
    ) -> DataFrame:
        history = DeltaTable.forName(session, self._spec.history_table)
        markers = truncate_markers(new, keys=keys, columns=columns)
        stored = history.toDF()
        old_truncates = stored.where((F.col(OP) == "t") & _all_null(keys))
        moments = [POSITION, LSN, TX_ID, VALID_FROM]
        truncates = old_truncates.select(*moments).union(markers.select(*moments))
        changes = new.where(F.col(OP) != "t")
        if markers.isEmpty():
            touched = changes.select(*keys).distinct()
        else:
            # A truncate touches every key there is.
            touched = stored.where(~_all_null(keys)).select(*keys).union(changes.select(*keys))
            touched = touched.distinct()
        existing = stored.join(touched, on=keys, how="left_semi")
        versions = detached(
            timeline(existing, changes, truncates, keys=keys, columns=columns).unionByName(markers)
        )
        self._merge_history(history, versions, keys, columns)
        return versions.where(~F.col(_DROP) & F.col(IS_CURRENT))

    def _merge_history(
        self, history: DeltaTable, versions: DataFrame, keys: list[str], columns: list[str]
    ) -> None:
        # Truncate markers have null keys, hence null-safe equality.
        on = " AND ".join([*(f"t.{k} <=> s.{k}" for k in keys), f"t.{POSITION} = s.{POSITION}"])
        on += f" AND t.{OP} = s.{OP}"
        updated = [VALID_TO, IS_CURRENT, *columns]
        differs = " OR ".join(f"NOT (t.{c} <=> s.{c})" for c in updated)
        versions = without_unchanged(versions, history.toDF(), flag=_DROP)
        if versions.isEmpty():
            return
        (
            history.alias("t")
            .merge(versions.alias("s"), on)
            .whenMatchedDelete(condition=f"s.{_DROP}")
            .whenMatchedUpdate(condition=differs, set={c: f"s.{c}" for c in updated})
            .whenNotMatchedInsert(
                condition=f"NOT s.{_DROP}",
                values={c: f"s.{c}" for c in versions.columns if c != _DROP},
            )
            .execute()
        )

    def _apply_current(self, latest: DataFrame, keys: list[str], session: SparkSession) -> None:
        current = DeltaTable.forName(session, self._spec.current_table)
        rows = latest.drop(_DROP, VALID_TO, IS_CURRENT, "_hub_unavailable")
        on = " AND ".join(f"t.{k} = s.{k}" for k in keys)
        values: dict[str, str | Column] = {c: f"s.{c}" for c in rows.columns if c != IS_DELETED}
        differs = " OR ".join(f"NOT (t.{c} <=> s.{c})" for c in values)
        rows = without_unchanged(rows, current.toDF(), flag=IS_DELETED)
        if rows.isEmpty():
            return
        (
            current.alias("t")
            .merge(rows.alias("s"), on)
            .whenMatchedDelete(condition=f"s.{IS_DELETED}")
            .whenMatchedUpdate(condition=differs, set=values)
            .whenNotMatchedInsert(condition=f"NOT s.{IS_DELETED}", values=values)
            .execute()
        )

    def _ensure_tables(self) -> None:
        """Create both silver tables, empty, with the columns the bronze table implies."""
        spec = self._spec
        self._spark.sql("CREATE DATABASE IF NOT EXISTS " + spec.silver_prefix.split(".")[0])
        bronze = self._spark.table(spec.bronze_table)
        keys = list(spec.key_columns)
        missing = [k for k in keys if k not in row_fields(bronze.schema)]
        if missing:
            raise LoaderError(
                f"Key columns {missing} of {spec.bronze_table} are not row columns of its "
                f"envelope ({', '.join(row_fields(bronze.schema))}); register the topic's key "
                "subject `<topic>-key` with the primary key fields."
            )
        columns = [c for c in row_fields(bronze.schema) if c not in keys]
        empty = events(bronze.limit(0), spec)
        versions = timeline(empty, empty, empty, keys=keys, columns=columns).drop(_DROP)
        if not self._spark.catalog.tableExists(spec.history_table):
            save_as_new_table(
                self._spark,
                versions.write.format("delta").options(
                    **new_table_properties(self._spark, spec.history_table)
                ),
                spec.history_table,
            )
            self._comment(spec.history_table, "SCD type 2 history")
        if not self._spark.catalog.tableExists(spec.current_table):
            current = versions.drop(*CURRENT_DROPPED)
            save_as_new_table(
                self._spark,
                current.write.format("delta").options(
                    **new_table_properties(self._spark, spec.current_table)
                ),
                spec.current_table,
            )
            self._comment(spec.current_table, "latest row per key")
        self._stamp_feeds()

    def _stamp_feeds(self) -> None:
        """Give both silver tables the feeds of their bronze table (`hub.feeds`), by which the
        analysts' server applies read grants; a bronze table without them yet is stamped by
        the bronze loader's next append, and silver follows at its next start."""
        feeds = catalog_properties(self._spark, self._spec.bronze_table).get(FEEDS_PROPERTY)
        if feeds:
            for table in (self._spec.history_table, self._spec.current_table):
                stamp_feeds(self._spark, table, feeds.split(","))

    def _comment(self, table: str, what: str) -> None:
        text = f"{what} of {self._spec.bronze_table}, in source order (hub silver)."
        set_table_comment(self._spark, table, text)


def _all_null(columns: Sequence[str]) -> Column:
    condition = F.lit(True)
    for column in columns:
        condition = condition & F.col(column).isNull()
    return condition


def start_silver(
    spark: SparkSession,
    settings: LoaderSettings,
    *,
    running: dict[str, StreamingQuery],
    available_now: bool = False,
) -> list[StreamingQuery]:
    """Start a silver stream for each changelog bronze table not yet followed in `running`.

    Each table has a stream of its own, so one table's failure stops only that stream; it is
    logged and restarted from its checkpoint at the next pass, and the others go on.
    """
    started: list[StreamingQuery] = []
    events = run_events(settings)
    for spec in discover(spark, settings):
        previous = running.get(spec.bronze_table)
        if previous is not None and previous.isActive:
            continue
        if previous is not None and previous.exception() is not None:
            log.error(
                "silver stream for %s stopped on %s; restarting it from its checkpoint",
                spec.bronze_table,
                describe(previous.exception()),  # type: ignore[arg-type]
            )
        loader = SilverLoader(
            spark, spec, checkpoint_dir=str(settings.checkpoint_dir), events=events
        )
        try:
            query = loader.start(
                available_now=available_now, trigger_seconds=settings.trigger_seconds
            )
        except LoaderError as exc:
            # One table's problem does not hold up the others.
            log.error("silver for %s not started: %s", spec.bronze_table, exc.message)
            continue
        except Exception as exc:
            if classify(exc) is not FailureKind.FEED:
                raise
            log.error("silver for %s not started: %s", spec.bronze_table, describe(exc))
            continue
        running[spec.bronze_table] = query
        started.append(query)
    return started
