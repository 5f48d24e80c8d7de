"""The bronze ledger entry the loader builds from a batch's offsets, requests and positions."""

import pytest

from hub_core.ledger import MAX_RANGES, MAX_REQUESTS, OffsetRange, RequestSpan, decode
from spark_loaders.tables.lineage import bronze_entry, runs_entry

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


def _run(partition: int, first: int, last: int, lsn: tuple[int, int] | None = None) -> dict:
    low, high = lsn or (None, None)
    return {"partition": partition, "first": first, "last": last, "lsn_min": low,
            "lsn_max": high, "tx_min": None, "tx_max": None}  # fmt: skip


def test_a_replayed_commit_names_each_run_of_its_offsets_and_no_batch() -> None:
    runs = [_run(0, 7, 8, (170, 180)), _run(1, 4, 4), _run(0, 2, 2, (120, 120))]
    requests = [{"partition": 0, "request_id": "r1", "first": 2, "last": 8}]

    entry = runs_entry("cdc.shop.public.orders", runs, requests)

    assert entry.batch is None
    assert entry.ranges == (
        OffsetRange(0, 2, 2, (120, 120)),
        OffsetRange(0, 7, 8, (170, 180)),
        OffsetRange(1, 4, 4),
    )
    assert entry.requests == (RequestSpan("r1", 0, 2, 8),)
    assert decode(entry.encode()) == entry


def test_a_replay_scattered_over_more_runs_than_the_limit_joins_the_closest() -> None:
    # Every other offset, and one far away: the far one stays apart.
    runs = [_run(0, 2 * n, 2 * n) for n in range(MAX_RANGES + 1)] + [_run(0, 10_000, 10_000)]

    entry = runs_entry("sales.orders", runs)

    assert len(entry.ranges) == MAX_RANGES
    assert entry.ranges[-1] == OffsetRange(0, 10_000, 10_000)
    assert entry.ranges[0] == OffsetRange(0, 0, 4)  # two gaps of the smallest size joined
