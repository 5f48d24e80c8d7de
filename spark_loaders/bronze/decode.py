"""Decoding Confluent-framed Avro inside Spark: each record by its writer schema id, resolved to
the newest registered schema of its subject, so rows of every version share one set of columns.

`from_avro(payload, writer, {"avroSchema": reader})` performs Avro schema resolution (added
fields take their defaults, promotions widen, removed fields are skipped). In PERMISSIVE mode a
record that does not decode becomes a struct of nulls, which cannot be told apart from a valid
record whose fields are all null. So each payload gets one extra byte, `0x01`, and is read as a
wrapper record `{value: <schema>, end: boolean}`: `end` is true only when the whole value
decoded. A writer the reader cannot resolve would silently decode to nulls as well, so the
resolution is checked on the driver first (the registry's own compatibility rules).
"""

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

from registry.compatibility import reader_can_read
from registry.types import SchemaId
from registry.wire import HEADER_SIZE, MAGIC_BYTE, frame
from spark_loaders.bronze.quarantine import QuarantineReason, quarantine_rows
from spark_loaders.bronze.schemas import LatestSchema, RegistryClient

# The Kafka source's columns, renamed to the hub's metadata columns.
METADATA_COLUMNS = {
    "_hub_key": "key",
    "_hub_partition": "partition",
    "_hub_offset": "offset",
    "_hub_timestamp": "timestamp",
    "_hub_schema_id": "_hub_schema_id",
    "_hub_request_id": "_hub_request_id",
    "_hub_idempotency_key": "_hub_idempotency_key",
}
# Kafka record headers the publish path writes (`publish.publisher`), landed as columns.
REQUEST_ID_HEADER = "hub.request-id"
IDEMPOTENCY_HEADER = "hub.idempotency-key"
_WRAPPER = "_hub_framed_value"


def with_schema_id(records: DataFrame) -> DataFrame:
    """Add `_hub_schema_id` (null unless the value has a valid Confluent header), and the
    publish request id and idempotency key from the record's headers (null without them)."""
    framed = (F.length("value") >= HEADER_SIZE) & (
        F.substring("value", 1, 1) == F.lit(bytes([MAGIC_BYTE]))
    )
    schema_id = F.conv(F.hex(F.substring("value", 2, 4)), 16, 10).cast("int")
    # The idempotency header is `<key>:<position in the request>`; the column holds the key.
    key = F.regexp_extract(_header(records, IDEMPOTENCY_HEADER), r"^(.*):[0-9]+$", 1)
    # One projection: each DataFrame step analyses the batch's plan again on the driver.
    return records.withColumns(
        {
            "_hub_schema_id": F.when(framed, schema_id),
            "_hub_request_id": _header(records, REQUEST_ID_HEADER),
            "_hub_idempotency_key": F.when(key != "", key),
        }
    )


def _metadata(columns: list[str], *, schema_id: Column | None = None) -> list[Column]:
    """The metadata columns; those the records lack (replayed quarantine rows carry no
    headers) are null. `schema_id` stands in for the records' `_hub_schema_id`."""
    chosen = []
    for name, source in METADATA_COLUMNS.items():
        if name == "_hub_schema_id" and schema_id is not None:
            column = schema_id
        elif source in columns:
            column = F.col(source)
        else:
            column = F.lit(None).cast("string")
        chosen.append(column.alias(name))
    return chosen


def _header(records: DataFrame, name: str) -> Column:
    """The first value of header `name` as text; null when absent or headers are not read."""
    if "headers" not in records.columns:
        return F.lit(None).cast("string")
    # The first header of that name, by its position among the keys: a lambda (`filter`)
    # would stop Spark from compiling the batch's projection, which cost a quarter of the
    # bronze write's time. `array_position` is 1-based and 0 when absent; `get` answers null
    # outside the array, where `element_at` fails under ANSI mode.
    position = F.array_position(F.col("headers.key"), name)
    return F.get(F.col("headers.value"), position - 1).cast("string")


def payload() -> Column:
    """The Avro datum after the 5-byte header."""
    return F.expr(f"substring(value, {HEADER_SIZE + 1}, length(value) - {HEADER_SIZE})")


@dataclass
class DecodedTopic:
    """One topic's records of a batch, split by what can be done with them.

    `known_rejected` are quarantine rows whose reason the driver found (no Confluent frame,
    unknown writer, unresolvable writer); `undecodable` are those whose payload failed to
    decode, known only once Spark runs, so it may be empty. `decodable` are the raw records
    that were decoded into `landed`, for quarantining them when the table cannot take them.
    """

    landed: DataFrame | None
    decodable: DataFrame | None
    undecodable: DataFrame | None
    reader: LatestSchema | None
    known_rejected: list[DataFrame] = field(default_factory=list)
    # The (writer, reader) schema texts each decoded writer id was read with.
    decoders: dict[SchemaId, tuple[str, str]] = field(default_factory=dict)
    # Why the records of each writer id the driver refused are in `known_rejected` (None: the
    # records without a Confluent frame).
    rejected: dict[SchemaId | None, QuarantineReason] = field(default_factory=dict)
    # Per decoded writer: the undecodable payloads, counted by the job that first reads `landed`.
    observations: list[Observation] = field(default_factory=list)

    def undecodable_count(self, *, wait_s: float = 2.0) -> int | None:
        """How many payloads did not decode, as counted while `landed` was written; None when
        no job read `landed` whole (Delta skipped a batch it already holds, or a MERGE read
        it), or the count did not arrive within `wait_s`.

        Spark delivers observed metrics through its listener bus, a moment after the job.
        """
        total = 0
        deadline = time.monotonic() + wait_s
        for observation in self.observations:
            # `Observation.get` waits for ever, and a write Delta skips never runs the job.
            if not _arrived(observation, max(0.0, deadline - time.monotonic())):
                return None
            total += _metrics(observation, "undecodable")[0]
        return total


def decode_topic(
    records: DataFrame,
    *,
    subject: str,
    schema_ids: Iterable[SchemaId],
    unframed: bool,
    registry: RegistryClient,
) -> DecodedTopic:
    """Split one topic's records (Kafka columns + `_hub_schema_id`) into decoded and rejected.

    `unframed` says whether the topic's records include some without a Confluent frame.
    """
    ids = sorted(schema_ids)
    reader = registry.latest(subject, newer_than=ids[-1] if ids else None)
    result = DecodedTopic(None, None, None, reader)
    if unframed:
        result.rejected[None] = QuarantineReason.NOT_CONFLUENT_FRAMED
        result.known_rejected.append(
            quarantine_rows(
                records.where(F.col("_hub_schema_id").isNull()),
                QuarantineReason.NOT_CONFLUENT_FRAMED,
                "the value does not start with the Confluent header (magic byte 0x00 and a "
                "4-byte schema id); it was not written by a hub or Confluent serializer",
            )
        )
    decodable: list[SchemaId] = []
    for schema_id in ids:
        rows = records.where(F.col("_hub_schema_id") == schema_id)
        writer = registry.schema(schema_id)
        if writer is None:
            message = (
                f"writer schema id {schema_id} is not in the registry; register it (or restore "
                "the deleted version) and run `hub load replay`"
            )
            reason = QuarantineReason.WRITER_SCHEMA_UNKNOWN
            result.rejected[schema_id] = reason
            result.known_rejected.append(quarantine_rows(rows, reason, message))
            continue
        reader_text = reader.text if reader is not None else writer
        problem = _resolution_problem(reader_text, writer)
        if problem is not None:
            version = f"version {reader.version} (id {reader.schema_id})" if reader else "?"
            message = (
                f"writer schema {schema_id} cannot be read as {subject} {version}: {problem}. "
                "Register a compatible version, then run `hub load replay`"
            )
            reason = QuarantineReason.SCHEMA_UNRESOLVABLE
            result.rejected[schema_id] = reason
            result.known_rejected.append(quarantine_rows(rows, reason, message))
            continue
        decodable.append(schema_id)
        result.decoders[schema_id] = (writer, reader_text)
        observation = Observation()
        result.observations.append(observation)
        # The write of `landed` counts the undecodable payloads as it decodes: knowing them
        # takes no second decoding pass.
        attempt = rows.withColumn("_hub_value", decode(writer, reader_text)).observe(
            observation,
            F.count_if(~F.coalesce(F.col("_hub_value.end"), F.lit(False))).alias("undecodable"),
        )
        good = attempt.where(F.col("_hub_value.end")).select(
            "_hub_value.value.*", *_metadata(rows.columns)
        )
        bad = quarantine_rows(
            attempt.where(~F.coalesce(F.col("_hub_value.end"), F.lit(False))),
            QuarantineReason.PAYLOAD_UNDECODABLE,
            f"the payload is not a valid Avro datum of writer schema {schema_id}",
        )
        result.landed = _union(result.landed, good, missing=True)
        result.undecodable = _union(result.undecodable, bad)
    if decodable:
        result.decodable = records.where(F.col("_hub_schema_id").isin(decodable))
    return result


@dataclass(frozen=True)
class TopicCounts:
    """What one topic's records in a batch held, counted by the job that wrote them."""

    total: int
    others: int  # records not framed with a writer of the topic's subject (see `SubjectDecode`)
    undecodable: int  # payloads of the subject's writers that did not decode
    requests: int  # records carrying a publish request id


class SubjectDecode:
    """One topic's records decoded by the writers registered under its value subject, in one
    pass: a CASE over the writer ids, each branch resolving to the newest version, so the job
    that writes the rows reads the batch once and needs no job before it to find the ids.

    Records of other writer ids (none of the subject's versions, or no Confluent frame) are
    left out of `landed` and counted, with the rest of `TopicCounts`, by that same job; they
    are for `decode_topic` to sort out, in a second pass that runs only when there are some.

    `landed` is built at once; `decodable`, `undecodable` and `others` when first asked for:
    most batches need none of them, and each DataFrame costs the driver an analysis of the
    batch's plan (together about a third of `decode_subject`'s time).
    """

    def __init__(
        self,
        records: DataFrame,
        known: Column,
        reader: LatestSchema | None,
        *,
        landed: DataFrame | None = None,
        observation: Observation | None = None,
        decoding: tuple[Column, Column] | None = None,
    ) -> None:
        """`known`: the record is framed with one of the decoded writers; `decoding`: the
        `_hub_value` column and whether it decoded whole (None: no writer to decode with)."""
        self.landed = landed
        self.reader = reader
        self.observation = observation
        self._records = records
        self._known = known
        self._decoding = decoding

    @cached_property
    def decodable(self) -> DataFrame:
        """The raw records decoded into `landed` (none when there was no writer to decode with)."""
        return self._records.where(self._known)

    @cached_property
    def undecodable(self) -> DataFrame | None:
        """Quarantine rows of the decodable records whose payload did not decode."""
        if self._decoding is None:
            return None
        value, decoded = self._decoding
        return quarantine_rows(
            self.decodable.withColumn("_hub_value", value).where(~decoded),
            QuarantineReason.PAYLOAD_UNDECODABLE,
            "the payload is not a valid Avro datum of its writer schema (`_hub_schema_id`)",
        )

    @cached_property
    def others(self) -> DataFrame:
        """The records framed with no writer of the subject, or not framed."""
        return self._records.where(~self._known)

    def counts(self, *, wait_s: float = 2.0) -> TopicCounts | None:
        """The counts of the job that first read `landed` whole; None when no job did (Delta
        skipped a write it already holds) or they did not arrive within `wait_s`."""
        if self.observation is None or not _arrived(self.observation, wait_s):
            return None
        total, others, undecodable, requests = _metrics(
            self.observation, "total", "others", "undecodable", "requests"
        )
        return TopicCounts(total, others, undecodable, requests)


def decode_subject(records: DataFrame, *, subject: str, registry: RegistryClient) -> SubjectDecode:
    """Decode the records (Kafka columns + `_hub_schema_id`) framed with one of the subject's
    own writer schemas that resolves to its newest version; see `SubjectDecode`."""
    reader = registry.latest(subject)
    writers: dict[SchemaId, str] = {}
    if reader is not None:
        for candidate, writer in sorted(registry.writers(subject).items()):
            if _resolution_problem(reader.text, writer) is None:
                writers[candidate] = writer
    # A record's writer is told by comparing its 5-byte frame with each writer's, as bytes,
    # and the landed rows' `_hub_schema_id` is the matching writer's id. The id as a number
    # (`with_schema_id`) takes three text conversions per record, paid again at each use (the
    # CASE, the counts, the column): decoding 1,000,000 records alone took 2.45 executor CPU
    # seconds that way and 2.21 this way (medians of 3, one session, beside other work).
    header = F.substring("value", 1, HEADER_SIZE)
    frames = {writer_id: F.lit(frame(writer_id, b"")) for writer_id in writers}
    known = F.coalesce(header.isin(list(frames.values())), F.lit(False))
    if not writers:
        return SubjectDecode(records, known, reader)
    assert reader is not None
    value: Column | None = None
    landed_id: Column | None = None
    for writer_id, writer in writers.items():
        branch = decode(writer, reader.text)
        framed_by = header == frames[writer_id]
        value = F.when(framed_by, branch) if value is None else value.when(framed_by, branch)
        landed_id = (
            F.when(framed_by, F.lit(writer_id))
            if landed_id is None
            else landed_id.when(framed_by, F.lit(writer_id))
        )
    assert value is not None and landed_id is not None
    decoded = F.coalesce(F.col("_hub_value.end"), F.lit(False))
    observation = Observation()
    attempt = records.withColumn("_hub_value", value).observe(
        observation,
        F.count(F.lit(1)).alias("total"),
        F.count_if(~known).alias("others"),
        F.count_if(known & ~decoded).alias("undecodable"),
        F.count("_hub_request_id").alias("requests"),
    )
    landed = attempt.where(decoded).select(
        "_hub_value.value.*", *_metadata(records.columns, schema_id=landed_id.cast("int"))
    )
    return SubjectDecode(
        records, known, reader, landed=landed, observation=observation, decoding=(value, decoded)
    )


def observed(observation: Observation, name: str, *, wait_s: float = 2.0) -> int | None:
    """Metric `name` of `observation`; None when no job ran it within `wait_s`."""
    return _metrics(observation, name)[0] if _arrived(observation, wait_s) else None


def _metrics(observation: Observation, *names: str) -> list[int]:
    """The named metrics of an observation whose job has run, read one by one: `Observation.get`
    iterates the JVM's map of them, and the Java exception that ends a py4j iteration costs the
    driver milliseconds (see `spark_loaders.runtime.progress`)."""
    assert observation._jo is not None
    metrics = observation._jo.getAsJava()
    return [int(metrics[name]) for name in names]


def _arrived(observation: Observation, wait_s: float) -> bool:
    """Whether the observation's metrics came, waiting up to `wait_s`: Spark delivers them
    through its listener bus a moment after the job, and never for a job that did not run."""
    if observation._jo is None:  # never attached to a DataFrame
        return False
    future = observation._jo.future()
    deadline = time.monotonic() + wait_s
    while not future.isCompleted():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


def _union(left: DataFrame | None, right: DataFrame, *, missing: bool = False) -> DataFrame:
    return right if left is None else left.unionByName(right, allowMissingColumns=missing)


def decode(writer: str, reader: str) -> Column:
    """The struct `{value, end}` of the current row's payload, resolved from writer to reader."""
    return from_avro(
        F.concat(payload(), F.lit(b"\x01")),
        _wrapped(writer),
        {"mode": "PERMISSIVE", "avroSchema": _wrapped(reader)},
    )


@lru_cache(maxsize=256)
def _wrapped(schema_text: str) -> str:
    wrapper = {
        "type": "record",
        "name": _WRAPPER,
        "fields": [
            {"name": "value", "type": json.loads(schema_text)},
            {"name": "end", "type": "boolean"},
        ],
    }
    return json.dumps(wrapper)


@lru_cache(maxsize=256)
def _resolution_problem(reader: str, writer: str) -> str | None:
    if reader == writer:
        return None
    problems = reader_can_read(json.loads(reader), json.loads(writer))
    return "; ".join(p.message() for p in problems) if problems else None
