"""A bronze batch is planned from the offsets its checkpoint names: each topic's first and last
offset per partition, read from the files Spark writes before running the batch."""

from pathlib import Path
from typing import Any

import pytest

from spark_loaders.bronze.offset_log import kafka_ranges

pytestmark = pytest.mark.unit

NO_SPARK: Any = None  # local checkpoints are read as plain files
METADATA = '{"batchWatermarkMs":0,"batchTimestampMs":1795570566469,"conf":{}}'


def _checkpoint(tmp_path: Path, initial: str, *ends: str) -> Path:
    """A checkpoint as Spark leaves it: the initial offsets (with the leading NUL byte Spark's
    Kafka source writes) and one offset file per batch."""
    (tmp_path / "sources" / "0").mkdir(parents=True)
    (tmp_path / "sources" / "0" / "0").write_text(f"\x00v1\n{initial}")
    (tmp_path / "offsets").mkdir()
    for batch, end in enumerate(ends):
        (tmp_path / "offsets" / str(batch)).write_text(f"v1\n{METADATA}\n{end}")
    return tmp_path


def test_the_first_batch_starts_at_the_initial_offsets_and_skips_partitions_without_records(
    tmp_path: Path,
) -> None:
    checkpoint = _checkpoint(
        tmp_path, '{"a":{"0":0,"1":5},"b":{"0":7}}', '{"a":{"0":10,"1":5},"b":{"0":7}}'
    )
    assert kafka_ranges(NO_SPARK, checkpoint, 0) == {"a": {0: (0, 9)}}


def test_a_later_batch_starts_where_the_previous_one_ended(tmp_path: Path) -> None:
    checkpoint = _checkpoint(
        tmp_path,
        '{"a":{"0":0,"1":0}}',
        '{"a":{"0":10,"1":4}}',
        '{"a":{"0":25,"1":4},"b":{"0":0}}',
    )
    assert kafka_ranges(NO_SPARK, checkpoint, 1) == {"a": {0: (10, 24)}}


def test_a_partition_that_appeared_since_the_last_batch_cannot_be_planned_from_the_files(
    tmp_path: Path,
) -> None:
    # Spark reads a new partition from the earliest offset Kafka holds: no file says which.
    checkpoint = _checkpoint(
        tmp_path, '{"a":{"0":0}}', '{"a":{"0":10}}', '{"a":{"0":12},"b":{"0":3}}'
    )
    assert kafka_ranges(NO_SPARK, checkpoint, 1) is None


def test_a_batch_whose_offsets_were_not_written_cannot_be_planned_from_the_files(
    tmp_path: Path,
) -> None:
    checkpoint = _checkpoint(tmp_path, '{"a":{"0":0}}', '{"a":{"0":10}}')
    assert kafka_ranges(NO_SPARK, checkpoint, 5) is None
