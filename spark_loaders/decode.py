"""Decoding Confluent-framed Avro inside Spark, per writer schema id."""

from collections.abc import Iterable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

from registry.types import SchemaId
from registry.wire import HEADER_SIZE, MAGIC_BYTE
from spark_loaders.schemas import RegistryClient

# The Kafka source's columns, renamed to the hub's metadata columns.
METADATA_COLUMNS = {
    "_hub_key": "key",
    "_hub_partition": "partition",
    "_hub_offset": "offset",
    "_hub_timestamp": "timestamp",
    "_hub_schema_id": "_hub_schema_id",
}


def with_schema_id(records: DataFrame) -> DataFrame:
    """Add `_hub_schema_id` (null unless the value has a valid Confluent header)."""
    framed = (F.length("value") >= HEADER_SIZE) & (
        F.substring("value", 1, 1) == F.lit(bytes([MAGIC_BYTE]))
    )
    schema_id = F.conv(F.hex(F.substring("value", 2, 4)), 16, 10).cast("int")
    return records.withColumn("_hub_schema_id", F.when(framed, schema_id))


def payload() -> Column:
    """The Avro datum after the 5-byte header."""
    return F.expr(f"substring(value, {HEADER_SIZE + 1}, length(value) - {HEADER_SIZE})")


def decode_batch(
    records: DataFrame, schema_ids: Iterable[SchemaId], registry: RegistryClient
) -> tuple[DataFrame | None, DataFrame | None]:
    """Split one topic's records into decoded rows and rows that cannot be decoded.

    Returns (decoded, rejected); `rejected` keeps the raw Kafka columns and a `_hub_reason`.
    """
    decoded: DataFrame | None = None
    rejected = records.where(F.col("_hub_schema_id").isNull()).withColumn(
        "_hub_reason", F.lit("value is not Confluent-framed Avro (no 0x00 magic byte)")
    )
    for schema_id in sorted(schema_ids):
        rows = records.where(F.col("_hub_schema_id") == schema_id)
        schema = registry.schema(schema_id)
        if schema is None:
            reason = f"writer schema id {schema_id} is not in the registry"
            rejected = rejected.unionByName(rows.withColumn("_hub_reason", F.lit(reason)))
            continue
        attempt = rows.withColumn(
            "_hub_value", from_avro(payload(), schema, {"mode": "PERMISSIVE"})
        )
        good = attempt.where(F.col("_hub_value").isNotNull()).select(
            "_hub_value.*", *[F.col(c).alias(n) for n, c in METADATA_COLUMNS.items()]
        )
        bad = attempt.where(F.col("_hub_value").isNull()).drop("_hub_value")
        reason = f"payload does not decode with writer schema {schema_id}"
        rejected = rejected.unionByName(bad.withColumn("_hub_reason", F.lit(reason)))
        decoded = good if decoded is None else decoded.unionByName(good, allowMissingColumns=True)
    return decoded, rejected
