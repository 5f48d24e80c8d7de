"""Landing every hub topic in `bronze.<topic>` Delta tables, exactly once.

One Structured Streaming query subscribes to all hub topics by pattern, so a topic created
while it runs is picked up without a restart. Each micro-batch is split by topic, decoded by
writer schema id and resolved to the subject's newest schema (re-read from the registry every
few seconds, so a new version is picked up live), and appended with Delta's idempotent writes
(`txnAppId`/`txnVersion`): a batch replayed after a crash is recognised by Delta and not
written twice. What cannot be landed goes to `quarantine.<topic>` with a reason code.

One bad feed never stops the others: a topic whose batch fails to land for a reason of its own
(see `spark_loaders.isolation`) goes whole to quarantine as `LANDING_FAILED`, or, if quarantine
cannot take it either, is parked, while the batch's other topics land as usual. Failures of a
dependency every topic shares (registry, metastore) are retried and then fail the batch, which
the query redoes from its checkpoint. Each topic's state is kept in `spark_loaders.feed_status`.
"""

import contextlib
import functools
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from hub_core.naming import TopicName, bronze_table, value_subject
from hub_core.retries import Backoff, retry_transient_interruptibly
from hub_kafka.security import spark_options
from hub_kafka.settings import KafkaSettings
from registry.types import SchemaId
from spark_loaders import storage
from spark_loaders.comments import TableComments, with_comments
from spark_loaders.decode import decode_topic, with_schema_id
from spark_loaders.errors import RegistryUnavailable
from spark_loaders.feed_status import FeedStatusBook
from spark_loaders.isolation import FailureKind, as_transient, classify, describe
from spark_loaders.kafka_access import check_kafka_access
from spark_loaders.lineage import bronze_entry, commit_metadata, request_spans, source_positions
from spark_loaders.metrics import LOADER_METRICS
from spark_loaders.openlineage import run_events
from spark_loaders.quarantine import QuarantineReason, quarantine_rows, quarantine_table
from spark_loaders.reprocess import SwapRequests, insert_missing
from spark_loaders.schemas import REGISTRY_BACKOFF, RegistryClient
from spark_loaders.settings import LoaderSettings
from spark_loaders.storage import Location
from spark_loaders.tables import PARTITION_COLUMN, DeltaTables
from spark_loaders.types import FeedState

log = logging.getLogger(__name__)

QUERY_NAME = "hub-bronze"
# A dependency failing while a topic lands (the metastore, a concurrent commit) is retried this
# long before the batch fails; registry reads are retried by the registry client instead.
LANDING_BACKOFF = Backoff(initial_s=1.0, max_s=10.0, jitter_s=1.0, attempts=4, timeout_s=60.0)


@dataclass
class _Progress:
    """How far landing one topic's batch got: a failure after the bronze write must not
    quarantine records that are already in bronze."""

    bronze_written: bool = False
    quarantined_whole: bool = False


class BronzeLoader:
    """The streaming query landing all topics in bronze, and undecodable records in quarantine."""

    def __init__(self, spark: SparkSession, settings: LoaderSettings, kafka: KafkaSettings) -> None:
        self._spark = spark
        self._settings = settings
        self._kafka = kafka
        self._registry = RegistryClient(
            settings.registry_url,
            api_key=settings.registry_key,
            latest_ttl_s=settings.schema_refresh_seconds,
            backoff=replace(REGISTRY_BACKOFF, timeout_s=settings.registry_retry_seconds),
        )
        self._tables = DeltaTables(spark)
        self._comments = TableComments(spark)
        self._checkpoint = settings.checkpoint_dir / QUERY_NAME
        self._txn_app_id = _checkpoint_identity(spark, self._checkpoint)
        self._swaps = SwapRequests(settings.state_dir)
        self._events = run_events(settings, kafka)
        self.statuses = FeedStatusBook.in_checkpoints(settings.state_dir)

    def start(self, *, available_now: bool = False) -> StreamingQuery:
        """Start the query; it runs until stopped, or with `available_now` until caught up."""
        check_kafka_access(self._spark, self._kafka)
        for database in ("bronze", "quarantine"):
            self._spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
        reader = (
            self._spark.readStream.format("kafka")
            .options(**spark_options(self._kafka))
            .option("subscribePattern", self._settings.topic_pattern)
            .option("startingOffsets", self._settings.starting_offsets)
            # New topics are found at the consumer's metadata refresh; keep it short.
            .option("kafka.metadata.max.age.ms", "3000")
            # Records of aborted atomic batches are never landed.
            .option("kafka.isolation.level", "read_committed")
            # A deleted topic's partitions vanish: by default Spark then fails the query, and
            # every other feed with it. What the topic held is gone from Kafka either way; see
            # docs/loaders.md, "Deleted feeds".
            .option("failOnDataLoss", str(self._settings.fail_on_data_loss).lower())
            # The publish request id and idempotency key travel as headers (lineage).
            .option("includeHeaders", "true")
        )
        if self._settings.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", self._settings.max_offsets_per_trigger)
        log.info(
            "landing topics matching %s into bronze (checkpoint %s)",
            self._settings.topic_pattern,
            self._checkpoint,
        )
        writer = (
            reader.load()
            .writeStream.queryName(QUERY_NAME)
            .foreachBatch(self._write_batch)
            .option("checkpointLocation", str(self._checkpoint))
        )
        if available_now:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{self._settings.trigger_seconds} seconds")
        return writer.start()

    def _write_batch(self, batch: DataFrame, batch_id: int) -> None:
        began = time.monotonic()
        merge_through = self._swaps.apply_pending(
            self._spark,
            self._tables,
            batch_id=batch_id,
            app_id=self._txn_app_id,
            on_swapped=lambda r: self.statuses.reprocessed(r.topic, end_offsets=r.end_offsets),
        )
        for table in merge_through:
            self._comments.forget(table)
        batch = with_schema_id(batch).persist()
        try:
            # One job tells which topics and writer schemas the batch holds, and how many
            # records of each; it also fills the cache the topics' writes read. Undecodable
            # payloads are counted while bronze is written (`DecodedTopic.undecodable_count`).
            # The same job gives each partition's offsets and whether any record came from
            # a publish request: what the lineage ledger entry of the topic's commit needs.
            pairs = (
                batch.groupBy("topic", "partition", "_hub_schema_id")
                .agg(
                    F.count(F.lit(1)).alias("count"),
                    F.min("offset").alias("first"),
                    F.max("offset").alias("last"),
                    F.count("_hub_request_id").alias("requests"),
                )
                .collect()
            )
            by_topic: dict[str, set[SchemaId]] = {}
            unframed: set[str] = set()
            # topic -> writer schema id (None: not Confluent-framed) -> records in the batch
            counts: dict[str, dict[SchemaId | None, int]] = {}
            offsets: dict[str, _TopicOffsets] = {}
            for row in pairs:
                ids = by_topic.setdefault(row["topic"], set())
                by_id = counts.setdefault(row["topic"], {})
                by_id[row["_hub_schema_id"]] = by_id.get(row["_hub_schema_id"], 0) + row["count"]
                offsets.setdefault(row["topic"], _TopicOffsets()).add(row)
                if row["_hub_schema_id"] is None:
                    unframed.add(row["topic"])
                else:
                    ids.add(SchemaId(row["_hub_schema_id"]))
            if any(topic_offsets.requests for topic_offsets in offsets.values()):
                # One job for every topic's publish request spans, not one per topic.
                for span in request_spans(batch):
                    offsets[span["topic"]].spans.append(span)
            ingested_at = F.current_timestamp()
            landed: list[str] = []
            topics = sorted(by_topic)
            run = self._events.run(
                QUERY_NAME, topics=topics, tables=[bronze_table(TopicName(t)) for t in topics]
            )
            with run if topics else contextlib.nullcontext():
                for topic in topics:
                    table = bronze_table(TopicName(topic))
                    merge = batch_id <= merge_through.get(table, -1)
                    records = batch.where(F.col("topic") == topic)
                    land = functools.partial(
                        self._land_topic,
                        records,
                        topic,
                        by_topic[topic],
                        unframed=topic in unframed,
                        batch_id=batch_id,
                        ingested_at=ingested_at,
                        merge=merge,
                        counts=counts[topic],
                        offsets=offsets[topic],
                    )
                    outcome = self._land_contained(
                        land,
                        records,
                        topic,
                        batch_id=batch_id,
                        ingested_at=ingested_at,
                        total=sum(counts[topic].values()),
                    )
                    landed.append(f"{table} <- {outcome}")
            if landed:
                log.info("batch %d: %s", batch_id, ", ".join(landed))
        finally:
            batch.unpersist()
        self._swaps.settle(batch_id)
        LOADER_METRICS.batch(QUERY_NAME, time.monotonic() - began)

    def _land_contained(
        self,
        land: Callable[..., str],
        records: DataFrame,
        topic: str,
        *,
        batch_id: int,
        ingested_at: Column,
        total: int,
    ) -> str:
        """`land(progress=...)` (`_land_topic` for one topic's `total` records), with the
        topic's own failures kept to the topic.

        Dependency failures are retried (`LANDING_BACKOFF`) and then raised: the batch fails
        and is redone from the checkpoint. A failure of the loader itself is raised as is.
        A failure of the feed sets its records aside (`_set_aside`) and returns.
        """
        progress = _Progress()

        def attempt() -> str:
            try:
                return land(progress=progress)
            except Exception as error:
                if classify(error) is FailureKind.DEPENDENCY:
                    raise as_transient(error) from error
                raise

        try:
            # The registry client retried its own requests already, for as long as configured.
            note = retry_transient_interruptibly(
                attempt,
                backoff=LANDING_BACKOFF,
                sleep=time.sleep,
                also=lambda failure: not isinstance(failure, RegistryUnavailable),
            )
        except Exception as error:
            if classify(error) is not FailureKind.FEED:
                raise
            note = self._set_aside(records, topic, error, batch_id, ingested_at, progress)
            if progress.quarantined_whole:
                LOADER_METRICS.quarantined(
                    bronze_table(TopicName(topic)), {QuarantineReason.LANDING_FAILED.value: total}
                )
            return f"{total} records: {note}"
        self.statuses.landing(topic, batch_id=batch_id)
        return note

    def _set_aside(
        self,
        records: DataFrame,
        topic: str,
        error: Exception,
        batch_id: int,
        ingested_at: Column,
        progress: _Progress,
    ) -> str:
        """Quarantine the topic's batch whole as LANDING_FAILED, or park it if that fails too.

        The quarantine write uses the quarantine table's own app id and the batch id, as the
        usual quarantine write of this topic and batch does: at most one of the two commits,
        so a batch redone after a crash writes neither twice. Should the redo land what the
        first run quarantined, `hub load replay` finds those rows in bronze and lands none
        twice. Records already written to bronze before the failure are not quarantined.
        """
        reason = QuarantineReason.LANDING_FAILED
        message = (
            f"landing {bronze_table(TopicName(topic))} failed: {describe(error)}. Fix the "
            f"cause, then run `hub load replay {topic}`"
        )
        if not progress.bronze_written:
            try:
                self._tables.append(
                    quarantine_rows(records, reason, message).withColumn(
                        "_hub_ingested_at", ingested_at
                    ),
                    quarantine_table(topic),
                    app_id=f"{self._txn_app_id}:{quarantine_table(topic)}",
                    version=batch_id,
                    partitioned=False,
                )
                progress.quarantined_whole = True
                self.statuses.set_aside(
                    topic,
                    FeedState.QUARANTINING,
                    batch_id=batch_id,
                    reason_code=reason.value,
                    message=message,
                )
                log.error("feed %s quarantined whole in batch %d: %s", topic, batch_id, message)
                return f"0 landed, all quarantined whole ({reason.value})"
            except Exception as second:
                if classify(second) is not FailureKind.FEED:
                    raise
                message += f"; quarantine failed too: {describe(second)}"
        offsets = {
            row["partition"]: (row["first"], row["last"])
            for row in records.groupBy("partition")
            .agg(F.min("offset").alias("first"), F.max("offset").alias("last"))
            .collect()
        }
        self.statuses.set_aside(
            topic,
            FeedState.PARKED,
            batch_id=batch_id,
            reason_code=reason.value,
            message=message,
            offsets=offsets,
        )
        log.error(
            "feed %s parked in batch %d, offsets %s wait in Kafka (`hub load reprocess %s` "
            "lands them once fixed): %s",
            topic,
            batch_id,
            offsets,
            topic,
            message,
        )
        return f"parked ({reason.value})"

    def _land_topic(
        self,
        records: DataFrame,
        topic: str,
        schema_ids: set[SchemaId],
        *,
        unframed: bool,
        batch_id: int,
        ingested_at: Column,
        merge: bool,
        counts: dict[SchemaId | None, int],
        offsets: "_TopicOffsets",
        progress: _Progress,
    ) -> str:
        """Land one topic's records of a batch; returns a note for the batch's log line.

        The note says how many records landed and how many went to quarantine, from the counts
        of the batch's first job (records per writer id) and of the bronze write (undecodable
        payloads): no Spark job runs just to tell them.
        """
        table = bronze_table(TopicName(topic))
        decoded = decode_topic(
            records,
            subject=value_subject(TopicName(topic)),
            schema_ids=schema_ids,
            unframed=unframed,
            registry=self._registry,
        )
        quarantined = list(decoded.known_rejected)
        check_empty = False
        total = sum(counts.values())
        # Unframed records and writers the driver refused (unknown, unresolvable) never decode;
        # quarantined records by reason code, and records landed, also go to the metrics.
        reasons: Counter[str] = Counter()
        for key, reason in decoded.rejected.items():
            reasons[reason.value] += counts[key]
        rejected = reasons.total()
        note = landing_note(total, rejected)
        landed = 0
        if decoded.landed is not None:
            reader = decoded.reader.text if decoded.reader else None
            rows = with_comments(
                decoded.landed.withColumn("_hub_ingested_at", ingested_at).withColumn(
                    PARTITION_COLUMN, F.to_date(ingested_at)
                ),
                reader,
            )
            refused = self._tables.evolve(table, rows.schema)
            if refused:
                message = "; ".join(change.describe() for change in refused) + (
                    ". Rebuild the table with `hub load reprocess`, then `hub load replay`."
                )
                assert decoded.decodable is not None
                quarantined.append(
                    quarantine_rows(
                        decoded.decodable, QuarantineReason.TYPE_CHANGE_UNSUPPORTED, message
                    )
                )
                note = landing_note(
                    total, total, why=f"{QuarantineReason.TYPE_CHANGE_UNSUPPORTED}: {message}"
                )
                reasons[QuarantineReason.TYPE_CHANGE_UNSUPPORTED.value] += total - rejected
            else:
                metadata = self._ledger_entry(topic, batch_id, offsets, rows)
                self._write(rows, table, batch_id, merge=merge, metadata=metadata)
                progress.bronze_written = True
                self._apply_comments(table, reader)
                bad = decoded.undecodable_count()
                if decoded.undecodable is not None and bad != 0:
                    quarantined.append(decoded.undecodable)
                    check_empty = bad is None and not decoded.known_rejected
                note = landing_note(total, rejected + (bad or 0), unsure=bad is None)
                if bad is not None:  # else Delta held the batch already: nothing landed now
                    landed = total - rejected - bad
                    reasons[QuarantineReason.PAYLOAD_UNDECODABLE.value] += bad
        if quarantined:
            rows = quarantined[0]
            for more in quarantined[1:]:
                rows = rows.unionByName(more)
            if not (check_empty and rows.isEmpty()):
                self._tables.append(
                    rows.withColumn("_hub_ingested_at", ingested_at),
                    quarantine_table(topic),
                    app_id=f"{self._txn_app_id}:{quarantine_table(topic)}",
                    version=batch_id,
                    partitioned=False,
                )
        LOADER_METRICS.landed(table, landed)
        LOADER_METRICS.quarantined(table, reasons)
        return note

    def _ledger_entry(
        self,
        topic: str,
        batch_id: int,
        offsets: "_TopicOffsets",
        rows: DataFrame,
    ) -> str | None:
        """The lineage ledger entry of the topic's bronze commit. Lineage never keeps records
        from landing: should the entry fail to build, the commit carries none (logged)."""
        try:
            return bronze_entry(
                topic,
                batch_id,
                offsets.ranges(),
                offsets.spans,
                source_positions(rows),
            ).encode()
        except (TypeError, ValueError, KeyError):
            log.warning("batch %d of %s lands without its lineage entry", batch_id, topic,
                        exc_info=True)  # fmt: skip
            return None

    def _apply_comments(self, table: str, reader: str | None) -> None:
        """Column comments are documentation: failing to set them never sets records aside."""
        try:
            state = self._tables.state(table)
            if state is not None:
                self._comments.apply(table, reader, state)
        except Exception as error:
            if classify(error) is not FailureKind.FEED:
                raise
            log.warning("could not set the column comments of %s: %s", table, describe(error))

    def _write(
        self, rows: DataFrame, table: str, batch_id: int, *, merge: bool, metadata: str | None
    ) -> None:
        state = self._tables.state(table)
        if merge and state is not None:
            # Just after a reprocessing swap: this batch may already be in the new location.
            with commit_metadata(rows.sparkSession, metadata):
                insert_missing(self._spark, rows, state.location)
            return
        self._tables.append(
            rows,
            table,
            app_id=f"{self._txn_app_id}:{table}",
            version=batch_id,
            partitioned=True,
            metadata=metadata,
        )


@dataclass
class _TopicOffsets:
    """One topic's offsets in a batch, per partition, from the batch's first job."""

    first: dict[int, int] = field(default_factory=dict)
    last: dict[int, int] = field(default_factory=dict)
    requests: int = 0  # records carrying a publish request id
    # (partition, request_id, first, last) of those records, from one job for the batch
    spans: list[Row] = field(default_factory=list)

    def add(self, row: Row) -> None:
        partition = row["partition"]
        self.first[partition] = min(self.first.get(partition, row["first"]), row["first"])
        self.last[partition] = max(self.last.get(partition, row["last"]), row["last"])
        self.requests += row["requests"]

    def ranges(self) -> list[dict[str, int]]:
        return [
            {"partition": p, "first": first, "last": self.last[p]}
            for p, first in sorted(self.first.items())
        ]


def landing_note(total: int, quarantined: int, *, unsure: bool = False, why: str = "") -> str:
    """`N records: L landed, Q quarantined` for the batch's log line. `unsure`: undecodable
    records were not counted, because Delta skipped a bronze write it already held (a batch
    redone after a crash); they are among those said to land, and went to quarantine."""
    note = f"{total} records: {'up to ' if unsure else ''}{total - quarantined} landed"
    if quarantined:
        note += f", {quarantined} quarantined"
    if unsure:
        note += ", undecodable ones quarantined"
    return note + (f" ({why})" if why else "")


def _checkpoint_identity(spark: SparkSession, checkpoint: Location) -> str:
    """A stable id for this checkpoint, made anew when the checkpoint is reset.

    Delta skips a (txnAppId, txnVersion) it has already committed. Batch ids restart at 0 with a
    new checkpoint, so the app id must change with it, or Delta would silently drop those batches.
    The marker therefore sits beside the checkpoint, in the bucket when the checkpoint is remote:
    a marker kept elsewhere could outlive a deleted checkpoint.
    """
    marker = checkpoint.parent / f"{checkpoint.name}.txn-app-id"
    if storage.exists(spark, marker) and storage.exists(spark, checkpoint):
        return storage.read_text(spark, marker).strip()
    identity = f"{QUERY_NAME}-{uuid.uuid4()}"
    storage.write_text(spark, marker, identity)
    return identity
