"""The lineage index: `LineageSync` copies ledger entries from `_delta_log`, `LineageStore` asks."""

from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from catalog.lineage import LineageStore, LineageSync
from catalog.tables import LineageCommitRow
from hub_core.ledger import SWAPPED_IN, LedgerEntry, LedgerKind, OffsetRange, RequestSpan, TableRead
from tests.support.ledger_log import write_commit

pytestmark = pytest.mark.unit

TOPIC = "cdc.shop.public.orders"
BRONZE = "bronze.cdc_shop_public_orders"
HISTORY = "silver.cdc_shop_public_orders_history"
BRONZE_ID = "5b0c6f0e-0000-4000-8000-000000000001"


def _bronze(batch: int, first: int, last: int, lsn: tuple[int, int]) -> LedgerEntry:
    return LedgerEntry(
        LedgerKind.BRONZE,
        batch=batch,
        topic=TOPIC,
        ranges=(OffsetRange(0, first, last, lsn, (batch, batch)),),
        requests=(RequestSpan(f"req-{batch}", 0, first, last),),
    )


def _silver(batch: int, read: TableRead) -> LedgerEntry:
    return LedgerEntry(LedgerKind.SILVER, batch=batch, reads=(read,))


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    bronze = tmp_path / "bronze.db" / "cdc_shop_public_orders"
    write_commit(bronze, 0, _bronze(0, 0, 4, (100, 140)), table_id=BRONZE_ID)
    write_commit(bronze, 1, _bronze(1, 5, 9, (150, 190)))
    history = tmp_path / "silver.db" / "cdc_shop_public_orders_history"
    write_commit(history, 0, None, operation="CREATE TABLE AS SELECT")
    write_commit(history, 1, _silver(0, TableRead(BRONZE, 0, 0, BRONZE_ID)))
    write_commit(history, 2, _silver(1, TableRead(BRONZE, 1, 1, BRONZE_ID)))
    (tmp_path / "quarantine.db" / "x" / "_delta_log").mkdir(parents=True)
    return tmp_path


def _entries(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.scalar(select(func.count()).select_from(LineageCommitRow)) or 0)


def test_a_sync_indexes_each_entry_once_and_resumes_after_the_newest_version(
    hub_engine: Engine, warehouse: Path
) -> None:
    sync = LineageSync(hub_engine, warehouse, min_interval_s=0)

    first = sync.sync()
    again = LineageSync(hub_engine, warehouse, min_interval_s=0).sync()  # another replica
    write_commit(
        warehouse / "bronze.db" / "cdc_shop_public_orders", 2, _bronze(2, 10, 12, (200, 220))
    )
    later = sync.sync()

    assert (first, again, later) == (4, 0, 1)
    assert _entries(hub_engine) == 5
    assert LineageStore(hub_engine).synced() == {BRONZE: 2, HISTORY: 2}


def test_an_offset_a_request_and_an_lsn_each_lead_to_their_bronze_and_silver_versions(
    hub_engine: Engine, warehouse: Path
) -> None:
    LineageSync(hub_engine, warehouse).sync()
    store = LineageStore(hub_engine)

    by_offset = store.bronze_holding(table=BRONZE, partition=0, offset=7)
    by_lsn = store.bronze_by_lsn(120)
    by_request = store.bronze_by_request("req-1")
    downstream = store.downstream([(BRONZE, 1)])

    assert [(h.version, h.first_offset, h.last_offset, h.lsn) for h in by_offset] == [
        (1, 5, 9, (150, 190))
    ]
    assert [h.version for h in by_lsn] == [0]
    assert [(h.topic, h.version) for h in by_request] == [(TOPIC, 1)]
    assert [(v.table, v.version, v.kind) for v in downstream] == [(HISTORY, 2, "silver")]
    assert store.bronze_holding(table=BRONZE, partition=1, offset=7) == []
    assert store.topic_of(BRONZE) == TOPIC


def test_a_position_leads_through_silver_to_the_first_gold_version_built_from_it(
    hub_engine: Engine, warehouse: Path
) -> None:
    dimension = warehouse / "gold.db" / "dim_order"
    write_commit(dimension, 0, None, operation="CREATE TABLE AS SELECT")  # the unknown member
    # Built from history 0..1, then (after history 2 landed) from 2 alone.
    for version, first, last in ((1, 0, 1), (2, 2, 2)):
        entry = LedgerEntry(LedgerKind.GOLD, reads=(TableRead(HISTORY, first, last),))
        write_commit(dimension, version, entry, operation="MERGE")
    LineageSync(hub_engine, warehouse, min_interval_s=0).sync()
    store = LineageStore(hub_engine)

    (first_batch,) = store.bronze_by_lsn(120)
    (second_batch,) = store.bronze_by_lsn(160)

    assert [
        (v.table, v.version, v.kind)
        for v in store.downstream([(first_batch.table, first_batch.version)])
    ] == [("gold.dim_order", 1, "gold"), (HISTORY, 1, "silver")]
    assert [
        (v.table, v.version) for v in store.downstream([(second_batch.table, second_batch.version)])
    ] == [("gold.dim_order", 2), (HISTORY, 2)]


def test_a_dimension_source_position_leads_to_the_facts_keyed_on_it_not_on_through_members(
    hub_engine: Engine, tmp_path: Path
) -> None:
    customers = "bronze.cdc_shop_public_customers"
    customers_history = "silver.cdc_shop_public_customers_history"
    dimension, fact = "gold.dim_customer", "gold.fact_orders"
    history = tmp_path / "silver.db" / "cdc_shop_public_customers_history"
    for version in (0, 1):
        read = TableRead(customers, version, version)
        write_commit(history, version, LedgerEntry(LedgerKind.SILVER, batch=version, reads=(read,)))

    def gold(*reads: TableRead) -> LedgerEntry:
        return LedgerEntry(LedgerKind.GOLD, reads=reads)

    # The dimension built from history 0; an inferred member from the orders (bronze 0..3),
    # naming them alone; the facts looked up in both. Then the dimension from history 1, and
    # the next facts (orders 4..5) keyed on it.
    dim_dir, fact_dir = tmp_path / "gold.db" / "dim_customer", tmp_path / "gold.db" / "fact_orders"
    write_commit(dim_dir, 1, gold(TableRead(customers_history, 0, 0)), operation="MERGE")
    write_commit(dim_dir, 2, gold(TableRead(BRONZE, 0, 3)), operation="MERGE")
    write_commit(fact_dir, 0, gold(TableRead(BRONZE, 0, 3), TableRead(dimension, 0, 2)))
    write_commit(dim_dir, 3, gold(TableRead(customers_history, 1, 1)), operation="MERGE")
    write_commit(
        fact_dir, 1, gold(TableRead(BRONZE, 4, 5), TableRead(dimension, 3, 3)), operation="MERGE"
    )
    LineageSync(hub_engine, tmp_path, min_interval_s=0).sync()
    store = LineageStore(hub_engine)

    def forward(table: str, version: int) -> list[tuple[str, int]]:
        return [(v.table, v.version) for v in store.downstream([(table, version)])]

    # From a customer's change to the dimension version and the facts keyed on it.
    assert forward(customers, 1) == [(dimension, 3), (fact, 1), (customers_history, 1)]
    assert forward(customers, 0) == [(dimension, 1), (fact, 0), (customers_history, 0)]
    # From an order to its inferred member and its facts, not on to later facts.
    assert forward(BRONZE, 2) == [(dimension, 2), (fact, 0)]


def test_a_replayed_commit_names_each_run_of_its_offsets_and_its_request_once(
    hub_engine: Engine, warehouse: Path
) -> None:
    # Offsets 2 and 7..8 of partition 0, quarantined by batches 0 and 1, then replayed.
    replayed = LedgerEntry(
        LedgerKind.BRONZE,
        topic=TOPIC,
        ranges=(OffsetRange(0, 2, 2, (120, 120), (0, 0)), OffsetRange(0, 7, 8, (170, 180), (1, 1))),
        requests=(RequestSpan("req-r", 0, 2, 8),),
    )
    write_commit(warehouse / "bronze.db" / "cdc_shop_public_orders", 2, replayed, operation="MERGE")
    LineageSync(hub_engine, warehouse).sync()
    store = LineageStore(hub_engine)

    def holding(offset: int) -> list[int]:
        return [h.version for h in store.bronze_holding(table=BRONZE, partition=0, offset=offset)]

    assert (holding(2), holding(5), holding(8)) == ([0, 2], [1], [1, 2])
    assert [
        (h.version, h.first_offset, h.last_offset) for h in store.bronze_by_request("req-r")
    ] == [(2, 2, 8)]
    assert [h.version for h in store.bronze_by_lsn(175)] == [1, 2]


def test_a_record_its_batch_quarantined_is_held_by_the_quarantine_not_by_the_batchs_bronze(
    hub_engine: Engine, warehouse: Path
) -> None:
    # Batch 1 (offsets 5..9) refused offset 7; batch 0 (0..4) went to quarantine whole after
    # a failed landing, and its redo landed it in bronze all the same (bronze version 0).
    quarantine = warehouse / "quarantine.db" / "cdc_shop_public_orders"
    refused = LedgerEntry(
        LedgerKind.QUARANTINE, batch=1, topic=TOPIC, ranges=(OffsetRange(0, 7, 7),), withheld=True
    )
    whole = LedgerEntry(LedgerKind.QUARANTINE, batch=0, topic=TOPIC, ranges=(OffsetRange(0, 0, 4),))
    write_commit(quarantine, 0, whole)
    write_commit(quarantine, 1, refused)
    replayed = LedgerEntry(LedgerKind.BRONZE, topic=TOPIC, ranges=(OffsetRange(0, 7, 7),))
    write_commit(warehouse / "bronze.db" / "cdc_shop_public_orders", 2, replayed, operation="MERGE")
    LineageSync(hub_engine, warehouse).sync()
    store = LineageStore(hub_engine)

    def holding(offset: int) -> list[tuple[str, int]]:
        hits = store.bronze_holding(topic=TOPIC, partition=0, offset=offset)
        return sorted((h.table, h.version) for h in hits)

    quarantined = "quarantine.cdc_shop_public_orders"
    assert holding(7) == [(BRONZE, 2), (quarantined, 1)]  # the replay's, not batch 1's
    assert holding(8) == [(BRONZE, 1)]
    assert holding(3) == [(BRONZE, 0), (quarantined, 0)]  # set aside whole: both hold it


def test_a_table_swapped_to_its_rebuild_is_indexed_from_there_not_from_its_old_location(
    hub_engine: Engine, warehouse: Path
) -> None:
    sync = LineageSync(hub_engine, warehouse, min_interval_s=0)
    sync.sync()
    rebuilds = warehouse / "_rebuilds" / "cdc_shop_public_orders"
    rebuilt = LedgerEntry(LedgerKind.BRONZE, topic=TOPIC, ranges=(OffsetRange(0, 0, 12),))
    new_id = "5b0c6f0e-0000-4000-8000-000000000002"
    write_commit(rebuilds / "20261125T050000Z", 0, rebuilt, table_id=new_id)
    write_commit(rebuilds / "20261125T060000Z", 0, rebuilt)  # built, not swapped in yet
    waiting = sync.sync()
    (rebuilds / "20261125T050000Z" / SWAPPED_IN).write_text(BRONZE)
    copied = LedgerEntry(LedgerKind.BRONZE, topic=TOPIC, ranges=(OffsetRange(0, 13, 14),))
    write_commit(rebuilds / "20261125T050000Z", 1, copied, operation="MERGE")
    # Silver, restarted on the rebuilt table, reads its versions 0..1.
    history = warehouse / "silver.db" / "cdc_shop_public_orders_history"
    write_commit(history, 3, _silver(0, TableRead(BRONZE, 0, 1, new_id)))

    swapped = sync.sync()
    store = LineageStore(hub_engine)

    # The new location's 2 commits, silver's 1, and the old location's 2 under its new name.
    assert (waiting, swapped) == (0, 5)
    assert sync.tables()[BRONZE] == str(rebuilds / "20261125T050000Z")
    assert [h.version for h in store.bronze_holding(table=BRONZE, partition=0, offset=7)] == [0]
    assert [h.version for h in store.bronze_holding(table=BRONZE, partition=0, offset=14)] == [1]
    # The old location's commits stay, under its retired name.
    old = f"{BRONZE}@original"
    assert sync.tables()[old] == str(warehouse / "bronze.db" / "cdc_shop_public_orders")
    held = store.bronze_holding(topic=TOPIC, partition=0, offset=7)
    assert sorted((h.table, h.version) for h in held) == [(BRONZE, 0), (old, 1)]
    assert [(h.table, h.version) for h in store.bronze_by_request("req-1")] == [(old, 1)]
    # Silver versions 1 and 2 read the old location's versions 0 and 1, version 3 the rebuilt
    # table's 0 and 1: each version leads to the silver versions that read its own location.
    assert [(v.table, v.version) for v in store.downstream([(BRONZE, 1)])] == [(HISTORY, 3)]
    assert [(v.table, v.version) for v in store.downstream([(BRONZE, 0)])] == [(HISTORY, 3)]
    assert [(v.table, v.version) for v in store.downstream([(old, 1)])] == [(HISTORY, 2)]
    assert store.commit(old, 1) is not None and store.commit(old, 2) is None


def test_request_spans_recorded_after_their_records_name_the_commit_that_landed_them(
    hub_engine: Engine, warehouse: Path
) -> None:
    # Batch 2 landed offsets 10..19 without its spans; a commit of their own came next.
    bronze = warehouse / "bronze.db" / "cdc_shop_public_orders"
    landed = LedgerEntry(LedgerKind.BRONZE, batch=2, topic=TOPIC, ranges=(OffsetRange(0, 10, 19),))
    write_commit(bronze, 2, landed)
    late = LedgerEntry(
        LedgerKind.BRONZE, batch=2, topic=TOPIC, requests=(RequestSpan("req-late", 0, 12, 15),)
    )
    write_commit(bronze, 3, late, operation="WRITE")
    LineageSync(hub_engine, warehouse).sync()
    store = LineageStore(hub_engine)

    hits = store.bronze_by_request("req-late")

    assert [(h.version, h.topic, h.first_offset, h.last_offset) for h in hits] == [
        (2, TOPIC, 12, 15)
    ]
    # A span recorded with its records still names its own commit only.
    assert [h.version for h in store.bronze_by_request("req-1")] == [1]
