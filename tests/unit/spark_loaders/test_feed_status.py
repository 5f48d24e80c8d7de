"""The loader's per-topic states, as `hub load status` and other processes read them."""

from pathlib import Path

import pytest

from spark_loaders.bronze.feed_status import FeedStatusBook
from spark_loaders.types import FeedState

pytestmark = pytest.mark.unit


def test_an_incident_is_visible_to_another_reader_with_reason_batch_and_parked_offsets(
    tmp_path: Path,
) -> None:
    book = FeedStatusBook.in_checkpoints(tmp_path)
    book.landing("sales.orders", batch_id=0)
    book.set_aside(
        "sales.orders",
        FeedState.PARKED,
        batch_id=3,
        reason_code="LANDING_FAILED",
        message="landing bronze.sales_orders failed: X: y",
        offsets={0: (10, 19)},
    )
    book.set_aside(
        "sales.orders",
        FeedState.PARKED,
        batch_id=4,
        reason_code="LANDING_FAILED",
        message="landing bronze.sales_orders failed: X: y",
        offsets={0: (20, 24), 1: (5, 5)},
    )

    [status] = FeedStatusBook.in_checkpoints(tmp_path).list()
    assert (status.state, status.batch_id, status.reason_code) == (
        FeedState.PARKED,
        4,
        "LANDING_FAILED",
    )
    assert status.parked_offsets == {"0": [10, 24], "1": [5, 5]}
    assert "parked" in status.describe() and "partition 0 offsets 10-24" in status.describe()


def test_a_topic_that_lands_again_says_so_and_keeps_the_offsets_still_waiting(
    tmp_path: Path,
) -> None:
    book = FeedStatusBook.in_checkpoints(tmp_path)
    book.set_aside(
        "a.b", FeedState.PARKED, batch_id=1, reason_code="LANDING_FAILED", message="m",
        offsets={0: (0, 4)},
    )  # fmt: skip
    book.landing("a.b", batch_id=2)
    status = FeedStatusBook.in_checkpoints(tmp_path).get("a.b")
    assert status is not None and status.state is FeedState.LANDING and status.batch_id == 2
    assert status.parked_offsets == {"0": [0, 4]}


def test_parked_offsets_a_swapped_in_rebuild_read_past_are_no_longer_listed(
    tmp_path: Path,
) -> None:
    book = FeedStatusBook.in_checkpoints(tmp_path)
    book.set_aside(
        "a.b", FeedState.PARKED, batch_id=1, reason_code="LANDING_FAILED", message="m",
        offsets={0: (0, 4), 1: (10, 19), 2: (7, 8)},
    )  # fmt: skip
    book.landing("a.b", batch_id=2)

    # The rebuild read partition 0 whole, partition 1 up to offset 14, partition 2 not at all.
    book.reprocessed("a.b", end_offsets={"0": 30, "1": 14})

    status = FeedStatusBook.in_checkpoints(tmp_path).get("a.b")
    assert status is not None and status.state is FeedState.LANDING
    assert status.parked_offsets == {"1": [15, 19], "2": [7, 8]}
    book.reprocessed("a.b", end_offsets={"1": 40, "2": 8})
    status = FeedStatusBook.in_checkpoints(tmp_path).get("a.b")
    assert status is not None and status.parked_offsets == {}
    assert "waiting in Kafka" not in status.describe()
