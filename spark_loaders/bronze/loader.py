"""Landing every hub topic in `bronze.<topic>` Delta tables, exactly once.

One Structured Streaming query subscribes to all hub topics by pattern, so a topic created
while it runs is picked up without a restart. Each micro-batch is split by topic, decoded by
writer schema id and resolved to the subject's newest schema (re-read from the registry every
few seconds, so a new version is picked up live), and appended with Delta's idempotent writes
(`txnAppId`/`txnVersion`): a batch replayed after a crash is recognised by Delta and not
written twice. What cannot be landed goes to `quarantine.<topic>` with a reason code.

One bad feed never stops the others: a topic whose batch fails to land for a reason of its own
(see `spark_loaders.runtime.isolation`) goes whole to quarantine as `LANDING_FAILED`, or, if
quarantine cannot take it either, is parked, while the batch's other topics land as usual.
Failures of a dependency every topic shares (registry, metastore) are retried and then fail the
batch, which the query redoes from its checkpoint. Each topic's state is kept in
`spark_loaders.bronze.feed_status`.
"""

import contextlib
import functools
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pyspark.sql import DataFrame, Observation, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from hub_core.naming import TopicName, bronze_table, value_subject
from hub_core.retries import Backoff, retry_transient_interruptibly
from hub_kafka.security import spark_options
from hub_kafka.settings import KafkaSettings
from registry.types import SchemaId
from spark_loaders.bronze.decode import decode_subject, decode_topic, observed, with_schema_id
from spark_loaders.bronze.feed_status import FeedStatusBook
from spark_loaders.bronze.ingestion import IngestionTime
from spark_loaders.bronze.kafka_access import check_kafka_access
from spark_loaders.bronze.offset_log import kafka_ranges, record_ranges
from spark_loaders.bronze.quarantine import QuarantineReason, quarantine_rows, quarantine_table
from spark_loaders.bronze.reprocess import SwapRequests, insert_missing
from spark_loaders.bronze.schemas import REGISTRY_BACKOFF, LatestSchema, RegistryClient
from spark_loaders.errors import RegistryUnavailable
from spark_loaders.runtime import storage
from spark_loaders.runtime.isolation import FailureKind, as_transient, classify, describe
from spark_loaders.runtime.metrics import LOADER_METRICS
from spark_loaders.runtime.storage import Location
from spark_loaders.settings import LoaderSettings
from spark_loaders.tables.comments import TableComments, with_comments
from spark_loaders.tables.delta_tables import DeltaTables
from spark_loaders.tables.lineage import (
    bronze_entry,
    commit_metadata,
    quarantine_entry,
    request_spans,
    source_positions,
)
from spark_loaders.tables.openlineage import run_events
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
        # Topics whose last batch carried publish request ids: their spans are gathered
        # before the write, to go in the same commit (`_record_requests` otherwise).
        self._published: set[str] = set()
        # Change feeds: their batches are read twice (source positions, then the write).
        self._change_feeds: set[str] = set()

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
        batch = with_schema_id(batch)
        # The batch's topics and offsets come from the checkpoint, so each topic's write is
        # planned without a job over the records. Only a batch reading a partition that
        # appeared since the previous one needs that job.
        ranges = kafka_ranges(self._spark, self._checkpoint, batch_id)
        try:
            if ranges is None:
                batch = batch.persist()
                ranges = record_ranges(batch)
            topics = sorted(ranges)
            ahead = [t for t in topics if t in self._published]
            # Read more than once (several topics, request spans gathered before the write,
            # the source positions of change events), the batch is cached by the first job
            # reading it.
            many = len(topics) > 1 or ahead or any(t in self._change_feeds for t in topics)
            if many and not batch.is_cached:
                batch = batch.persist()
            spans: dict[str, list[Row]] = {topic: [] for topic in ahead}
            if ahead:
                # One job for the publish request spans of every topic expected to have some.
                for span in request_spans(batch.where(F.col("topic").isin(ahead))):
                    spans[span["topic"]].append(span)
            landed: list[str] = []
            ingested_at = IngestionTime.now()
            run = self._events.run(
                QUERY_NAME, topics=topics, tables=[bronze_table(TopicName(t)) for t in topics]
            )
            with run if topics else contextlib.nullcontext():
                for topic in topics:
                    table = bronze_table(TopicName(topic))
                    records = batch.where(F.col("topic") == topic)
                    land = functools.partial(
                        self._land_topic,
                        records,
                        topic,
                        _TopicBatch(batch_id, ranges[topic], spans.get(topic)),
                        ingested_at=ingested_at,
                        merge=batch_id <= merge_through.get(table, -1),
                    )
                    outcome = self._land_contained(
                        land, records, topic, batch_id=batch_id, ingested_at=ingested_at
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
        ingested_at: IngestionTime,
    ) -> str:
        """`land(progress=...)` (`_land_topic` for one topic's records), with the topic's own
        failures kept to the topic.

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
            return self._set_aside(records, topic, error, batch_id, ingested_at, progress)
        self.statuses.landing(topic, batch_id=batch_id)
        return note

    def _set_aside(
        self,
        records: DataFrame,
        topic: str,
        error: Exception,
        batch_id: int,
        ingested_at: IngestionTime,
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
            counted = Observation()
            try:
                rows = quarantine_rows(records, reason, message)
                self._tables.append(
                    rows.withColumn("_hub_ingested_at", ingested_at.column).observe(
                        counted, F.count(F.lit(1)).alias("records")
                    ),
                    quarantine_table(topic),
                    app_id=f"{self._txn_app_id}:{quarantine_table(topic)}",
                    version=batch_id,
                    partitioned=False,
                    feed=topic,
                    metadata=quarantine_entry(topic, batch_id, rows, withheld=False).encode(),
                )
                self.statuses.set_aside(
                    topic,
                    FeedState.QUARANTINING,
                    batch_id=batch_id,
                    reason_code=reason.value,
                    message=message,
                )
                log.error("feed %s quarantined whole in batch %d: %s", topic, batch_id, message)
                # Not counted when Delta held the write already (a batch redone).
                total = observed(counted, "records") or 0
                table = bronze_table(TopicName(topic))
                LOADER_METRICS.quarantined(table, {reason.value: total})
                return f"{total} records: 0 landed, all quarantined whole ({reason.value})"
            except Exception as second:
                if classify(second) is not FailureKind.FEED:
                    raise
                message += f"; quarantine failed too: {describe(second)}"
        offsets = record_ranges(records).get(topic, {})
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
        batch: "_TopicBatch",
        *,
        ingested_at: IngestionTime,
        merge: bool,
        progress: _Progress,
    ) -> str:
        """Land one topic's records of a batch; returns a note for the batch's log line.

        The records of the subject's own writers are decoded and written by one job, which
        also counts what the note and the metrics need (`SubjectDecode`). Records of other
        writers, undecodable payloads and request spans not gathered ahead each take a job
        more, run only when that job's counts say there are some, or when no count came
        because Delta already held the write (a batch redone after a crash).
        """
        table = bronze_table(TopicName(topic))
        decoded = decode_subject(
            records, subject=value_subject(TopicName(topic)), registry=self._registry
        )
        landing = _Landing(topic, table, batch, ingested_at, merge)
        counts = None
        redone = False
        if decoded.landed is not None and self._land_rows(
            landing, decoded.landed, decoded.reader, lambda: decoded.decodable
        ):
            progress.bronze_written = True
            counts = decoded.counts()
            redone = counts is None
            if counts is None or counts.undecodable:
                assert decoded.undecodable is not None
                landing.quarantine(decoded.undecodable)
            if counts is not None:
                landing.landed += counts.total - counts.others - counts.undecodable
                landing.reasons[QuarantineReason.PAYLOAD_UNDECODABLE.value] += counts.undecodable
        others = counts is None or counts.others > 0
        if others and self._land_others(landing, decoded.others, topic):
            progress.bronze_written = True
        if counts is not None and counts.requests == 0:
            self._published.discard(topic)
        elif batch.spans is None and progress.bronze_written:
            # Records carrying request ids where the previous batch had none, or not known.
            try:
                self._record_requests(landing, records, topic)
            except Exception as error:  # lineage never sets landed records aside
                if classify(error) is not FailureKind.FEED:
                    raise
                log.warning("batch %d of %s: its request spans were not recorded: %s",
                            batch.batch_id, topic, describe(error))  # fmt: skip
        if landing.quarantined:
            rows = landing.quarantined[0]
            for more in landing.quarantined[1:]:
                rows = rows.unionByName(more)
            # The entry's runs say whether there is anything to write (the rows may be none).
            entry = quarantine_entry(topic, batch.batch_id, rows, withheld=True)
            if entry.ranges:
                self._tables.append(
                    rows.withColumn("_hub_ingested_at", ingested_at.column),
                    quarantine_table(topic),
                    app_id=f"{self._txn_app_id}:{quarantine_table(topic)}",
                    version=batch.batch_id,
                    partitioned=False,
                    feed=topic,
                    metadata=entry.encode(),
                )
        LOADER_METRICS.landed(table, landing.landed)
        LOADER_METRICS.quarantined(table, landing.reasons)
        return landing.note(redone=redone)

    def _land_rows(
        self,
        landing: "_Landing",
        decoded: DataFrame,
        reader: LatestSchema | None,
        raw: Callable[[], DataFrame],
        *,
        part: str = "",
    ) -> bool:
        """Append decoded rows to the topic's bronze table; False when the table cannot take
        their columns, and `raw()` (the records they were decoded from) goes to quarantine.

        `part` names a second append of the same batch (records of other writers), with an
        app id of its own so that each append is idempotent by itself.
        """
        text = reader.text if reader else None
        rows = with_comments(decoded.withColumns(landing.ingested_at.columns()), text)
        refused = self._tables.evolve(landing.table, rows.schema)
        if refused:
            reason = QuarantineReason.TYPE_CHANGE_UNSUPPORTED
            message = "; ".join(change.describe() for change in refused) + (
                ". Rebuild the table with `hub load reprocess`, then `hub load replay`."
            )
            rejected = quarantine_rows(raw(), reason, message)
            landing.quarantine(rejected)
            # Counted by a job of its own: a refused change is rare, and stops the topic.
            landing.reasons[reason.value] += rejected.count()
            landing.why = f"{reason}: {message}"
            return False
        metadata = self._ledger_entry(landing, rows)
        self._write(rows, landing, metadata=metadata, part=part)
        self._apply_comments(landing.table, text)
        return True

    def _land_others(self, landing: "_Landing", others: DataFrame, topic: str) -> bool:
        """The records not framed with a writer of the topic's subject: a writer registered
        under another subject, an unknown or unresolvable one, or no frame at all. Returns
        whether any landed in bronze."""
        by_id = {
            row["_hub_schema_id"]: row["count"]
            for row in others.groupBy("_hub_schema_id").count().collect()
        }
        if not by_id:
            return False
        subject = value_subject(TopicName(topic))
        ids = {SchemaId(i) for i in by_id if i is not None}
        if ids:
            self._registry.forget(subject)  # a version registered since the last read
        decoded = decode_topic(
            others, subject=subject, schema_ids=ids, unframed=None in by_id, registry=self._registry
        )
        for key, reason in decoded.rejected.items():
            landing.reasons[reason.value] += by_id[key]
        landing.quarantined.extend(decoded.known_rejected)
        if decoded.landed is None:
            return False
        decodable = decoded.decodable
        assert decodable is not None
        if not self._land_rows(
            landing, decoded.landed, decoded.reader, lambda: decodable, part="others"
        ):
            return False
        bad = decoded.undecodable_count()
        if decoded.undecodable is not None and bad != 0:
            landing.quarantine(decoded.undecodable)
        landing.landed += sum(by_id[i] for i in decoded.decoders) - (bad or 0)
        landing.reasons[QuarantineReason.PAYLOAD_UNDECODABLE.value] += bad or 0
        return True

    def _record_requests(self, landing: "_Landing", records: DataFrame, topic: str) -> None:
        """Record the publish request spans of a batch landed without them, in a commit of
        their own: an empty append with an app id of its own, so it is made once however
        often the batch is redone. The index finds the bronze version holding each span by
        its offsets (`catalog.lineage`)."""
        found = request_spans(records)
        state = self._tables.state(landing.table)
        if not found or state is None:
            return
        self._published.add(topic)
        entry = bronze_entry(topic, landing.batch.batch_id, [], found).encode()
        self._tables.append(
            self._spark.read.format("delta").load(state.location).limit(0),
            landing.table,
            app_id=f"{self._txn_app_id}:{landing.table}:requests",
            version=landing.batch.batch_id,
            partitioned=True,
            feed=topic,
            metadata=entry,
        )

    def _ledger_entry(self, landing: "_Landing", rows: DataFrame) -> str | None:
        """The lineage ledger entry of the topic's bronze commit. Lineage never keeps records
        from landing: should the entry fail to build, the commit carries none (logged)."""
        batch = landing.batch
        try:
            positions = source_positions(rows)
            if positions:  # a change feed: its next batches are cached for this job
                self._change_feeds.add(landing.topic)
            return bronze_entry(
                landing.topic, batch.batch_id, batch.offset_rows(), batch.spans or [], positions
            ).encode()
        except (TypeError, ValueError, KeyError):
            log.warning("batch %d of %s lands without its lineage entry", batch.batch_id,
                        landing.topic, exc_info=True)  # fmt: skip
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
        self, rows: DataFrame, landing: "_Landing", *, metadata: str | None, part: str = ""
    ) -> None:
        table = landing.table
        state = self._tables.state(table)
        if landing.merge and state is not None:
            # Just after a reprocessing swap: this batch may already be in the new location.
            with commit_metadata(rows.sparkSession, metadata):
                insert_missing(self._spark, rows, state.location)
            return
        self._tables.append(
            rows,
            table,
            app_id=":".join((self._txn_app_id, table, part) if part else (self._txn_app_id, table)),
            version=landing.batch.batch_id,
            partitioned=True,
            feed=landing.topic,
            metadata=metadata,
        )


@dataclass(frozen=True)
class _TopicBatch:
    """One topic's part of a batch: its offset ranges, and its publish request spans when
    they were gathered before the write (None: they were not)."""

    batch_id: int
    ranges: dict[int, tuple[int, int]]
    spans: list[Row] | None = None

    def offset_rows(self) -> list[dict[str, int]]:
        return [
            {"partition": p, "first": first, "last": last}
            for p, (first, last) in sorted(self.ranges.items())
        ]


@dataclass
class _Landing:
    """What landing one topic's batch did so far: records landed, reasons records went to
    quarantine and the quarantine rows to write, in one commit, at the end."""

    topic: str
    table: str
    batch: _TopicBatch
    ingested_at: IngestionTime
    merge: bool
    landed: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    quarantined: list[DataFrame] = field(default_factory=list)
    why: str = ""

    def quarantine(self, rows: DataFrame) -> None:
        """Rows to write to quarantine at the end of the batch; they may be none."""
        self.quarantined.append(rows)

    def note(self, *, redone: bool) -> str:
        quarantined = self.reasons.total()
        return landing_note(self.landed + quarantined, quarantined, redone=redone, why=self.why)


def landing_note(total: int, quarantined: int, *, redone: bool = False, why: str = "") -> str:
    """`N records: L landed, Q quarantined` for the batch's log line. `redone`: Delta already
    held the batch's bronze write (a batch redone after a crash), so the records it skipped
    are not counted; the note counts only what landed or went to quarantine now."""
    note = f"{total} records: {total - quarantined} landed"
    if redone:
        note = f"{total} records more than Delta held already: {total - quarantined} landed"
    if quarantined:
        note += f", {quarantined} quarantined"
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
