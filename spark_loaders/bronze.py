"""Landing every hub topic in `bronze.<topic>` Delta tables, exactly once.

One Structured Streaming query subscribes to all hub topics by pattern, so a topic created
while it runs is picked up without a restart. Each micro-batch is split by topic, decoded by
writer schema id, and appended with Delta's idempotent writes (`txnAppId`/`txnVersion`): a
batch replayed after a crash is recognised by Delta and not written twice.
"""

import logging
import uuid
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from hub_kafka.settings import KafkaSettings
from hub_kafka.topics import TopicName, bronze_table, table_suffix
from registry.types import SchemaId
from spark_loaders.comments import TableComments
from spark_loaders.decode import decode_batch, with_schema_id
from spark_loaders.schemas import RegistryClient
from spark_loaders.settings import LoaderSettings

log = logging.getLogger(__name__)

QUERY_NAME = "hub-bronze"


class BronzeLoader:
    """The streaming query landing all topics in bronze, and undecodable records in quarantine."""

    def __init__(self, spark: SparkSession, settings: LoaderSettings, kafka: KafkaSettings) -> None:
        self._spark = spark
        self._settings = settings
        self._kafka = kafka
        self._registry = RegistryClient(settings.registry_url, api_key=settings.registry_key)
        self._comments = TableComments(spark, self._registry)
        self._checkpoint = settings.checkpoint_dir / QUERY_NAME
        self._txn_app_id = _checkpoint_identity(self._checkpoint)

    def start(self, *, available_now: bool = False) -> StreamingQuery:
        """Start the query; it runs until stopped, or with `available_now` until caught up."""
        for database in ("bronze", "quarantine"):
            self._spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
        reader = (
            self._spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", self._kafka.bootstrap_servers)
            .option("subscribePattern", self._settings.topic_pattern)
            .option("startingOffsets", self._settings.starting_offsets)
            # New topics are found at the consumer's metadata refresh; keep it short.
            .option("kafka.metadata.max.age.ms", "3000")
            # Records of aborted atomic batches are never landed.
            .option("kafka.isolation.level", "read_committed")
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
        batch = with_schema_id(batch).persist()
        try:
            # One job tells which topics and writer schemas the batch holds, and how many records.
            pairs = batch.groupBy("topic", "_hub_schema_id").count().collect()
            by_topic: dict[str, set[SchemaId]] = {}
            counts: dict[str, int] = {}
            for row in pairs:
                ids = by_topic.setdefault(row["topic"], set())
                counts[row["topic"]] = counts.get(row["topic"], 0) + row["count"]
                if row["_hub_schema_id"] is not None:
                    ids.add(SchemaId(row["_hub_schema_id"]))
            ingested_at = F.current_timestamp()
            landed: list[str] = []
            for topic, schema_ids in sorted(by_topic.items()):
                records = batch.where(F.col("topic") == topic)
                decoded, rejected = decode_batch(records, schema_ids, self._registry)
                if decoded is not None:
                    rows = decoded.withColumn("_hub_ingested_at", ingested_at).withColumn(
                        "_hub_ingest_date", F.to_date(ingested_at)
                    )
                    table = bronze_table(TopicName(topic))
                    self._append(rows, table, batch_id)
                    self._comments.apply(table, schema_ids, rows.columns)
                    landed.append(f"{table} <- {counts[topic]} records")
                if rejected is not None:
                    quarantined = rejected.withColumn("_hub_ingested_at", ingested_at)
                    table = f"quarantine.{table_suffix(TopicName(topic))}"
                    self._append(quarantined, table, batch_id, skip_empty=True)
            if landed:
                log.info("batch %d: %s", batch_id, ", ".join(landed))
        finally:
            batch.unpersist()

    def _append(
        self, rows: DataFrame, table: str, batch_id: int, *, skip_empty: bool = False
    ) -> None:
        if skip_empty and rows.isEmpty():
            return
        writer = (
            rows.write.format("delta")
            .mode("append")
            .option("mergeSchema", "true")
            # Idempotent write: Delta records (app id, batch id) and ignores a replay of it.
            .option("txnAppId", f"{self._txn_app_id}:{table}")
            .option("txnVersion", batch_id)
        )
        if table.startswith("bronze."):
            writer = writer.partitionBy("_hub_ingest_date")
        writer.saveAsTable(table)


def _checkpoint_identity(checkpoint: Path) -> str:
    """A stable id for this checkpoint, made anew when the checkpoint is reset.

    Delta skips a (txnAppId, txnVersion) it has already committed. Batch ids restart at 0 with a
    new checkpoint, so the app id must change with it, or Delta would silently drop those batches.
    """
    marker = checkpoint.parent / f"{checkpoint.name}.txn-app-id"
    if marker.exists() and checkpoint.exists():
        return marker.read_text().strip()
    identity = f"{QUERY_NAME}-{uuid.uuid4()}"
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(identity)
    return identity
