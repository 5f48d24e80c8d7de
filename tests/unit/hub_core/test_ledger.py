"""The lineage ledger: entries in a commit's `userMetadata`, and reading them from `_delta_log`."""

import json
from pathlib import Path

import pytest

from hub_core.ledger import (
    SWAPPED_IN,
    LedgerEntry,
    LedgerKind,
    LocalFiles,
    OffsetRange,
    RequestSpan,
    TableRead,
    decode,
    joined_ranges,
    log_commits,
    table_location,
    warehouse_tables,
)
from tests.support.ledger_log import write_commit

pytestmark = pytest.mark.unit

BRONZE = LedgerEntry(
    LedgerKind.BRONZE,
    batch=7,
    topic="cdc.shop.public.orders",
    ranges=(OffsetRange(0, 10, 19, (100, 180), (5, 9)), OffsetRange(1, 3, 3)),
    requests=(RequestSpan("3f2a", 1, 3, 3),),
    requests_omitted=2,
)
SILVER = LedgerEntry(
    LedgerKind.SILVER,
    batch=3,
    reads=(
        TableRead("bronze.cdc_shop_public_orders", 4, 6, "0f6c2c1e-5d7a-4b0e-9a51-1d2e3f405060"),
    ),
)
QUARANTINE = LedgerEntry(
    LedgerKind.QUARANTINE,
    batch=7,
    topic="cdc.shop.public.orders",
    ranges=(OffsetRange(0, 12, 12),),
    withheld=True,
)


@pytest.mark.parametrize(
    "entry", [BRONZE, SILVER, QUARANTINE], ids=["bronze", "silver", "quarantine"]
)
def test_an_entry_reads_back_as_it_was_written(entry: LedgerEntry) -> None:
    assert decode(entry.encode()) == entry


def test_an_entry_is_compact_json_naming_its_version_and_kind() -> None:
    text = BRONZE.encode()

    assert " " not in text
    body = json.loads(text)
    assert body["v"] == 1 and body["kind"] == "bronze"
    assert body["ranges"][0] == {"p": 0, "first": 10, "last": 19, "lsn": [100, 180], "tx": [5, 9]}


@pytest.mark.parametrize(
    "text",
    [None, "", "a note someone wrote", '{"v": 99, "kind": "bronze"}', '{"v": 1, "kind": "x"}',
     '{"v": 1, "kind": "bronze", "ranges": [{"p": 0}]}', "{not json"],
)  # fmt: skip
def test_metadata_that_is_not_a_ledger_entry_is_no_lineage_not_an_error(text: str | None) -> None:
    assert decode(text) is None


def test_log_commits_returns_each_commit_after_a_version_with_its_entry_a_page_at_a_time(
    tmp_path: Path,
) -> None:
    write_commit(tmp_path, 0, BRONZE, operation="CREATE TABLE AS SELECT", table_id="t-1")
    write_commit(tmp_path, 1, None, operation="OPTIMIZE")
    write_commit(tmp_path, 2, SILVER, operation="MERGE")
    (tmp_path / "_delta_log" / "00000000000000000002.checkpoint.parquet").write_bytes(b"")

    commits = log_commits(LocalFiles(), str(tmp_path))
    later = log_commits(LocalFiles(), str(tmp_path), after=1)
    page = log_commits(LocalFiles(), str(tmp_path), limit=2)

    assert [(c.version, c.operation, c.entry, c.table_id) for c in commits] == [
        (0, "CREATE TABLE AS SELECT", BRONZE, "t-1"),  # the commit that set the table's id
        (1, "OPTIMIZE", None, None),
        (2, "MERGE", SILVER, None),
    ]
    assert [c.version for c in later] == [2]
    assert [c.version for c in page] == [0, 1]


def test_a_table_without_a_log_has_no_commits(tmp_path: Path) -> None:
    assert log_commits(LocalFiles(), str(tmp_path / "missing")) == []


def test_runs_of_a_partition_stay_apart_within_the_limit_and_the_closest_join_beyond_it() -> None:
    runs = [
        OffsetRange(0, 30, 31, (300, 310), (3, 3)),
        OffsetRange(0, 10, 12, (100, 120), (1, 2)),
        OffsetRange(1, 5, 5),
        OffsetRange(0, 14, 14, (140, 140), (2, 2)),
    ]

    # In (partition, first) order, each run its own range.
    assert joined_ranges(runs, limit=4) == (
        OffsetRange(0, 10, 12, (100, 120), (1, 2)),
        OffsetRange(0, 14, 14, (140, 140), (2, 2)),
        OffsetRange(0, 30, 31, (300, 310), (3, 3)),
        OffsetRange(1, 5, 5),
    )
    # One too many: the smallest gap (12..14) joins, with the source positions of both.
    assert joined_ranges(runs, limit=3) == (
        OffsetRange(0, 10, 14, (100, 140), (1, 2)),
        OffsetRange(0, 30, 31, (300, 310), (3, 3)),
        OffsetRange(1, 5, 5),
    )
    # Never across partitions: one range per partition at least.
    assert joined_ranges(runs, limit=1) == (
        OffsetRange(0, 10, 31, (100, 310), (1, 3)),
        OffsetRange(1, 5, 5),
    )


def test_an_entry_with_several_ranges_of_a_partition_reads_back_as_written() -> None:
    entry = LedgerEntry(
        LedgerKind.BRONZE,
        topic="sales.orders",
        ranges=(OffsetRange(0, 3, 4), OffsetRange(0, 9, 9), OffsetRange(2, 1, 1)),
    )

    assert decode(entry.encode()) == entry
    assert '"batch"' not in entry.encode()


def test_locations_a_swap_replaced_are_listed_under_retired_names(tmp_path: Path) -> None:
    original = tmp_path / "bronze.db" / "orders"
    rebuilds = tmp_path / "_rebuilds" / "orders"
    write_commit(original, 0, None)
    for stamp in ("20261125T050000Z", "20261126T050000Z", "20261127T050000Z"):
        write_commit(rebuilds / stamp, 0, None)
    for stamp in ("20261125T050000Z", "20261126T050000Z"):  # the third awaits its swap
        (rebuilds / stamp / SWAPPED_IN).write_text("bronze.orders")
    files, warehouse = LocalFiles(), str(tmp_path)

    tables = warehouse_tables(files, warehouse)

    assert tables == {
        "bronze.orders": str(rebuilds / "20261126T050000Z"),
        "bronze.orders@original": str(original),
        "bronze.orders@20261125T050000Z": str(rebuilds / "20261125T050000Z"),
    }
    for name, location in tables.items():
        assert table_location(files, warehouse, name) == location
    assert table_location(files, warehouse, "bronze.orders@20261127T050000Z") is None
    assert table_location(files, warehouse, "bronze.orders@../x") is None
    assert table_location(files, warehouse, "silver.orders@original") is None
