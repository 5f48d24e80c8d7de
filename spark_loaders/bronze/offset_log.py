"""Which Kafka offsets a micro-batch of the bronze query reads, from its checkpoint alone.

Spark writes a batch's end offsets to `<checkpoint>/offsets/<batch>` before it runs the batch;
the batch starts where the previous one ended, and the first batch where the query's initial
offsets (`<checkpoint>/sources/0/0`) say. Knowing the batch's topics and offset ranges from
these small files spares the loader a Spark job over the records before it can plan their
writes (docs/loaders.md, "Figures").
"""

import json
import logging
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_loaders.runtime import storage
from spark_loaders.runtime.storage import Location

log = logging.getLogger(__name__)

# topic -> partition -> (first offset, last offset), both inclusive
Ranges = dict[str, dict[int, tuple[int, int]]]


def kafka_ranges(spark: SparkSession, checkpoint: Location, batch_id: int) -> Ranges | None:
    """The offsets batch `batch_id` reads, per topic and partition, leaving out partitions it
    reads nothing of. None when the checkpoint cannot tell: a partition the batch reads had no
    offset at the batch's start (a topic or partition that appeared since; Spark starts those
    at the earliest offset Kafka still holds), or a file is missing or unreadable.

    A range is the span of offsets the batch covers, so it may include offsets that hold no
    record the batch lands: transaction markers, records of aborted transactions.
    """
    try:
        end = _offsets(spark, checkpoint / "offsets" / str(batch_id), skip=2)
        if batch_id == 0:
            start = _offsets(spark, checkpoint / "sources" / "0" / "0", skip=1)
        else:
            start = _offsets(spark, checkpoint / "offsets" / str(batch_id - 1), skip=2)
    except Exception:  # a batch without these is planned from its records instead
        log.warning("could not read the offsets of batch %d in %s", batch_id, checkpoint,
                    exc_info=True)  # fmt: skip
        return None
    if end is None or start is None:
        return None
    ranges: Ranges = {}
    for topic, partitions in end.items():
        for partition, last_exclusive in partitions.items():
            first = start.get(topic, {}).get(partition)
            if first is None:
                if last_exclusive > 0:
                    return None
                continue  # new, and empty: nothing to read
            if last_exclusive > first:
                ranges.setdefault(topic, {})[partition] = (first, last_exclusive - 1)
    return ranges


def record_ranges(records: DataFrame) -> Ranges:
    """The offsets the records (Kafka source columns) span, per topic and partition: a job,
    for a batch whose checkpoint cannot tell (`kafka_ranges`)."""
    ranges: Ranges = {}
    for row in (
        records.groupBy("topic", "partition")
        .agg(F.min("offset").alias("first"), F.max("offset").alias("last"))
        .collect()
    ):
        ranges.setdefault(row["topic"], {})[row["partition"]] = (row["first"], row["last"])
    return ranges


def _offsets(spark: SparkSession, path: Location, *, skip: int) -> dict[str, dict[int, int]] | None:
    """The Kafka source offset in an offset log file: after `skip` lines (the log's version,
    and for `offsets/<batch>` the batch's metadata), `{"topic": {"partition": offset}}`."""
    if not storage.exists(spark, path):
        return None
    lines = storage.read_text(spark, path).lstrip("\x00").splitlines()
    for line in lines[skip:]:
        if line.strip().startswith("{"):
            return _as_offsets(json.loads(line))
    return None


def _as_offsets(body: Any) -> dict[str, dict[int, int]]:
    return {
        str(topic): {int(p): int(o) for p, o in partitions.items()}
        for topic, partitions in body.items()
    }
