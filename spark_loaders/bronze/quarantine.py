"""Quarantine: records the loader could not land in bronze, kept whole with the reason why.

A quarantined row carries the raw Kafka key and value, where it came from (topic, partition,
offset, timestamp), the writer schema id, a stable reason code and a message naming the fix.
`hub load replay` decodes them again once the cause is fixed.
"""

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from hub_core.naming import TopicName, table_suffix
from spark_loaders.types import QuarantineReason

# Quarantine columns holding the Kafka record itself, in table order, from the source's columns.
KAFKA_COLUMNS = {
    "_hub_topic": "topic",
    "_hub_partition": "partition",
    "_hub_offset": "offset",
    "_hub_timestamp": "timestamp",
    "_hub_key": "key",
    "_hub_value": "value",
    "_hub_schema_id": "_hub_schema_id",
}


def quarantine_table(topic: str) -> str:
    """`quarantine.<topic with dots as underscores>`."""
    return f"quarantine.{table_suffix(TopicName(topic))}"


def quarantine_rows(records: DataFrame, reason: QuarantineReason, message: str) -> DataFrame:
    """Kafka records (source columns + `_hub_schema_id`) as quarantine rows with a reason."""
    return records.select(
        *[F.col(kafka).alias(hub) for hub, kafka in KAFKA_COLUMNS.items()],
        F.lit(reason.value).alias("_hub_reason_code"),
        F.lit(message).alias("_hub_reason"),
        F.lit(1).alias("_hub_attempts"),
    )


def as_kafka_records(rows: DataFrame) -> DataFrame:
    """Quarantine rows back in the Kafka source's column names, to decode them again."""
    return rows.select(*[F.col(hub).alias(kafka) for hub, kafka in KAFKA_COLUMNS.items()])
