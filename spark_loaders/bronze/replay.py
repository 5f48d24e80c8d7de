"""`hub load replay`: decode quarantined records again and land what now decodes, once.

Landing inserts only rows whose (partition, offset) bronze does not hold yet, and quarantine
rows are removed (landed) or updated with their new reason (still failing) in one MERGE after
that. A replay that crashes in between, or runs twice, finds the landed rows already in bronze
and inserts nothing twice. Both MERGEs read whole tables, so an append by the running stream in
the meantime makes Delta refuse the commit; it is retried, which is safe for the same reason.

The bronze commit carries a ledger entry naming the offsets it lands (`lineage.landed_entry`),
computed from the rows bronze lacks: a repeated replay inserts nothing, so it commits nothing
and adds no entry. The entry is a session conf, and the replay may run on the running loader's
shared session (its control port's `POST /replay`), from which streams start: the replay runs
on a session of its own (`lineage.ledger_session`).
"""

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from hub_core.naming import TopicName, bronze_table, value_subject
from hub_core.retries import Backoff, retry_transient
from registry.types import SchemaId
from spark_loaders.bronze.decode import decode_topic
from spark_loaders.bronze.ingestion import IngestionTime
from spark_loaders.bronze.quarantine import as_kafka_records, quarantine_rows, quarantine_table
from spark_loaders.bronze.reprocess import land_missing
from spark_loaders.bronze.schemas import RegistryClient
from spark_loaders.errors import LoaderSourceNotFound, TableCommitConflict
from spark_loaders.runtime.isolation import FailureKind, classify, describe
from spark_loaders.runtime.work_progress import WorkProgress, no_progress
from spark_loaders.settings import LoaderSettings
from spark_loaders.tables.delta_tables import DeltaTables
from spark_loaders.tables.lineage import landed_entry, ledger_session
from spark_loaders.types import QuarantineReason

log = logging.getLogger(__name__)

# Reading the quarantine, landing what decodes, updating the quarantine.
_REPLAY_STEPS = 3

# Conflicts last as long as a concurrent commit of the running stream: seconds, not minutes.
_CONFLICT_BACKOFF = Backoff(initial_s=0.5, max_s=5.0, jitter_s=0.5, attempts=5, timeout_s=60.0)


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """How many quarantined records landed, and why the others still fail."""

    topic: str
    examined: int
    landed: int
    still_failing: dict[str, int]

    def describe(self) -> str:
        failing = ", ".join(f"{n} {code}" for code, n in sorted(self.still_failing.items()))
        return (
            f"{self.topic}: {self.examined} quarantined records examined, {self.landed} landed in "
            f"{bronze_table(TopicName(self.topic))}"
            + (f"; still quarantined: {failing}" if failing else "")
        )


def replay(
    spark: SparkSession,
    settings: LoaderSettings,
    topic: str,
    *,
    progress: WorkProgress = no_progress,
) -> ReplayResult:
    """Re-drive `quarantine.<topic>` into `bronze.<topic>`; see the module docstring.

    `progress` hears of its three steps: reading the quarantine, landing, updating it.
    """
    spark = ledger_session(spark)
    source = quarantine_table(topic)
    table = bronze_table(TopicName(topic))
    if not spark.catalog.tableExists(source):
        raise LoaderSourceNotFound(
            f"{source} does not exist: nothing of topic {topic} was quarantined "
            "(check the topic name)."
        )
    progress(f"reading {source}", 0, _REPLAY_STEPS)
    quarantined = spark.table(source).dropDuplicates(["_hub_partition", "_hub_offset"]).persist()
    try:
        pairs = quarantined.groupBy("_hub_schema_id").count().collect()
        examined = sum(r["count"] for r in pairs)
        if not examined:
            progress(f"replayed 0 records of {source}", _REPLAY_STEPS, _REPLAY_STEPS)
            return ReplayResult(topic, 0, 0, {})
        progress(f"decoding {examined} records, landing them in {table}", 1, _REPLAY_STEPS)
        records = as_kafka_records(quarantined)
        try:
            failures, landed_keys = _redrive(spark, settings, topic, records, pairs)
        except Exception as error:
            if classify(error) is not FailureKind.FEED:
                raise
            # The topic still cannot be landed: keep every record, with today's reason.
            message = (
                f"landing {table} failed: {describe(error)}. Fix the cause, then run "
                f"`hub load replay {topic}`"
            )
            log.warning("replay of %s: %s", topic, message)
            failures = [quarantine_rows(records, QuarantineReason.LANDING_FAILED, message)]
            landed_keys = None
        progress(f"updating {source}", 2, _REPLAY_STEPS)
        outcome = _outcome(failures, landed_keys)
        counts = Counter(
            {r["_hub_reason_code"]: r["count"] for r in _failure_counts(outcome).collect()}
        )
        location = str(spark.sql(f"DESCRIBE DETAIL {source}").first()["location"])  # type: ignore[index]
        _retrying(lambda: _settle(spark, outcome, location), what=source)
    finally:
        quarantined.unpersist()
    landed = examined - sum(counts.values())
    result = ReplayResult(topic, examined, landed, dict(counts))
    progress(f"replayed {examined} records of {source}", _REPLAY_STEPS, _REPLAY_STEPS)
    log.info("%s", result.describe())
    return result


def _redrive(
    spark: SparkSession, settings: LoaderSettings, topic: str, records: DataFrame, pairs: list[Row]
) -> tuple[list[DataFrame], DataFrame | None]:
    """Decode quarantined records again and land what decodes: (still failing, landed keys)."""
    table = bronze_table(TopicName(topic))
    registry = RegistryClient(settings.registry_url, api_key=settings.registry_key)
    try:
        decoded = decode_topic(
            records,
            subject=value_subject(TopicName(topic)),
            schema_ids={SchemaId(r["_hub_schema_id"]) for r in pairs if r["_hub_schema_id"]},
            unframed=any(r["_hub_schema_id"] is None for r in pairs),
            registry=registry,
        )
    finally:
        registry.close()
    tables = DeltaTables(spark)
    failures = list(decoded.known_rejected)
    landed_keys: DataFrame | None = None
    if decoded.landed is not None:
        rows = decoded.landed.withColumns(IngestionTime.now().columns())
        refused = tables.evolve(table, rows.schema)
        if refused:
            assert decoded.decodable is not None
            message = "; ".join(c.describe() for c in refused)
            reason = QuarantineReason.TYPE_CHANGE_UNSUPPORTED
            failures.append(quarantine_rows(decoded.decodable, reason, message))
        else:
            _retrying(lambda: _land(spark, tables, rows, topic), what=table)
            landed_keys = rows.select("_hub_partition", "_hub_offset")
            if decoded.undecodable is not None:
                failures.append(decoded.undecodable)
    return failures, landed_keys


def _land(spark: SparkSession, tables: DeltaTables, rows: DataFrame, topic: str) -> None:
    table = bronze_table(TopicName(topic))
    state = tables.state(table)
    if state is None:
        entry = landed_entry(topic, rows).encode()
        tables.append(rows, table, app_id="hub-replay", version=0, partitioned=True,
                      feed=topic, metadata=entry)  # fmt: skip
    else:
        land_missing(spark, rows, state.location, topic=topic)


def _outcome(failures: list[DataFrame], landed: DataFrame | None) -> DataFrame:
    """(partition, offset, landed, reason code, reason) of every replayed record."""
    parts = [
        f.select(
            "_hub_partition",
            "_hub_offset",
            F.lit(False).alias("landed"),
            "_hub_reason_code",
            "_hub_reason",
        )
        for f in failures
    ]
    if landed is not None:
        parts.append(
            landed.select(
                "_hub_partition",
                "_hub_offset",
                F.lit(True).alias("landed"),
                F.lit(None).cast("string").alias("_hub_reason_code"),
                F.lit(None).cast("string").alias("_hub_reason"),
            )
        )
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    return result


def _failure_counts(outcome: DataFrame) -> DataFrame:
    return outcome.where(~F.col("landed")).groupBy("_hub_reason_code").count()


def _settle(spark: SparkSession, outcome: DataFrame, location: str) -> None:
    """Remove landed records from quarantine; give the others their new reason."""
    from delta.tables import DeltaTable

    (
        DeltaTable.forPath(spark, location)
        .alias("t")
        .merge(
            outcome.alias("s"),
            "t._hub_partition = s._hub_partition AND t._hub_offset = s._hub_offset",
        )
        .whenMatchedDelete(condition="s.landed")
        .whenMatchedUpdate(
            set={
                "_hub_reason_code": "s._hub_reason_code",
                "_hub_reason": "s._hub_reason",
                "_hub_attempts": "t._hub_attempts + 1",
            }
        )
        .execute()
    )


def _retrying(action: Callable[[], None], *, what: str) -> None:
    """Run an idempotent Delta write again when a concurrent commit made Delta refuse it."""

    def once() -> None:
        try:
            action()
        except PySparkException as exc:
            if "Concurrent" not in str(exc):
                raise
            log.info("a concurrent commit to %s refused the write", what)
            raise TableCommitConflict(
                f"Concurrent commits to {what} kept refusing the replay's write; run "
                "`hub load replay` again (it lands nothing twice)."
            ) from exc

    retry_transient(once, backoff=_CONFLICT_BACKOFF)
