"""The bronze ledger entry the loader builds from a batch's offsets, requests and positions."""

import pytest

from hub_core.ledger import MAX_REQUESTS, OffsetRange, RequestSpan, decode
from spark_loaders.lineage import bronze_entry

pytestmark = pytest.mark.unit


def test_a_batch_of_many_requests_lists_them_in_offset_order_up_to_the_limit() -> None:
    # Later requests hold lower offsets here: the entry lists them by offset.
    count = MAX_REQUESTS + 3
    requests = [
        {"partition": 0, "request_id": f"r{n}", "first": 2 * (count - n), "last": 2 * (count - n)}
        for n in range(count)
    ]

    entry = bronze_entry("sales.orders", 4, [{"partition": 0, "first": 0, "last": 1001}], requests)

    assert len(entry.requests) == MAX_REQUESTS and entry.requests_omitted == 3
    assert entry.requests[0] == RequestSpan(f"r{count - 1}", 0, 2, 2)
    assert decode(entry.encode()) == entry


def test_change_events_carry_their_lsn_and_transaction_ranges_per_partition() -> None:
    entry = bronze_entry(
        "cdc.shop.public.orders",
        0,
        [{"partition": 1, "first": 5, "last": 9}, {"partition": 0, "first": 3, "last": 3}],
        positions=[
            {"partition": 1, "lsn_min": 100, "lsn_max": 190, "tx_min": 7, "tx_max": 8},
            {"partition": 0, "lsn_min": None, "lsn_max": None, "tx_min": None, "tx_max": None},
        ],
    )

    assert entry.ranges == (OffsetRange(0, 3, 3), OffsetRange(1, 5, 9, (100, 190), (7, 8)))
