"""Silver current (SCD1) and history (SCD2) on scripted change sequences, checked row by row."""

import json
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import DataType, LongType, StringType

from hub_cli.demo import schema_text
from hub_core.naming import TopicName, table_suffix
from spark_loaders.settings import LoaderSettings
from spark_loaders.silver.changes import UNAVAILABLE_VALUE, ChangelogSpec
from spark_loaders.silver.keys import discover
from spark_loaders.silver.loader import SilverLoader
from spark_loaders.tables.delta_tables import FEEDS_PROPERTY, catalog_properties, stamp_feeds
from tests.support.changelog import ChangeLog
from tests.support.loader import register

pytestmark = pytest.mark.integration

ROW: list[tuple[str, DataType]] = [
    ("id", LongType()),
    ("name", StringType()),
    ("email", StringType()),
]


def _spec(spark: SparkSession) -> tuple[ChangelogSpec, ChangeLog]:
    suffix = f"customers_{uuid.uuid4().hex[:8]}"
    spark.sql("CREATE DATABASE IF NOT EXISTS bronze")
    log = ChangeLog(table="customers", row=ROW)
    log.append(spark, f"bronze.{suffix}", [])
    return ChangelogSpec(f"bronze.{suffix}", f"silver.{suffix}", ("id",)), log


def _c(id_: int, name: str | None, email: str | None) -> dict[str, Any]:
    return {"id": id_, "name": name, "email": email}


def _t(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC).replace(tzinfo=None)


def _current(spark: SparkSession, spec: ChangelogSpec) -> list[tuple[Any, ...]]:
    rows = spark.sql(
        f"SELECT id, name, email, _hub_op, _hub_lsn, valid_from FROM {spec.current_table}"
    ).collect()
    return sorted(tuple(r) for r in rows)


def _history(spark: SparkSession, spec: ChangelogSpec) -> list[tuple[Any, ...]]:
    rows = spark.sql(
        f"""SELECT id, name, email, _hub_op, _hub_lsn, valid_from, valid_to, is_current,
                   is_deleted
            FROM {spec.history_table}"""
    ).collect()
    return sorted((tuple(r) for r in rows), key=lambda r: (r[0] is not None, r[0] or 0, r[4]))


def test_changes_in_source_order_build_current_and_history(spark: SparkSession) -> None:
    spec, log = _spec(spark)
    loader = SilverLoader(spark, spec, checkpoint_dir="/unused")
    loader._ensure_tables()

    def apply(batch_id: int, rows: list[tuple[Any, ...]]) -> None:
        loader.apply(log.frame(spark, rows), batch_id)

    # Inserts; two events for key 1 in one batch reduce to the later one in current.
    apply(0, [
        log.event("c", lsn=100, ts_ms=1000, after=_c(1, "Ann", "a@x")),
        log.event("c", lsn=110, ts_ms=1100, after=_c(2, "Bob", "b@x")),
        log.event("u", lsn=120, ts_ms=1200, after=_c(1, "Ann", "ann@x")),
    ])  # fmt: skip
    assert _current(spark, spec) == [
        (1, "Ann", "ann@x", "u", 120, _t(1200)),
        (2, "Bob", "b@x", "c", 110, _t(1100)),
    ]
    # A late update (older than the stored row) and a duplicate change nothing in current.
    apply(1, [
        log.event("u", lsn=200, ts_ms=2000, after=_c(2, "Bobby", "b@x")),
        log.event("u", lsn=115, ts_ms=1150, after=_c(1, "Ann", "old@x")),
        log.event("c", lsn=110, ts_ms=1100, after=_c(2, "Bob", "b@x")),
    ])  # fmt: skip
    assert _current(spark, spec) == [
        (1, "Ann", "ann@x", "u", 120, _t(1200)),
        (2, "Bobby", "b@x", "u", 200, _t(2000)),
    ]
    # A delete removes the row; an unavailable TOAST value keeps the stored one.
    batch_2 = [
        log.event("d", lsn=300, ts_ms=3000, before=_c(2, None, None)),
        log.event("u", lsn=310, ts_ms=3100, after=_c(1, "Annie", UNAVAILABLE_VALUE)),
        log.event("c", lsn=320, ts_ms=3200, after=_c(3, "Cy", "c@x")),
    ]
    apply(2, batch_2)
    after_batch_2 = [
        (1, "Annie", "ann@x", "u", 310, _t(3100)),
        (3, "Cy", "c@x", "c", 320, _t(3200)),
    ]
    assert _current(spark, spec) == after_batch_2
    history_after_batch_2 = _history(spark, spec)
    # The same batch again (a replay after a crash) is a no-op in both tables.
    apply(2, batch_2)
    assert _current(spark, spec) == after_batch_2
    assert _history(spark, spec) == history_after_batch_2

    # A truncate empties current as of its position.
    apply(3, [log.event("t", lsn=400, ts_ms=4000)])
    assert _current(spark, spec) == []
    # Events older than the truncate land in history before it and stay out of current.
    apply(4, [
        log.event("c", lsn=500, ts_ms=5000, after=_c(4, "Di", "d@x")),
        log.event("u", lsn=390, ts_ms=3900, after=_c(3, "Cy", "cy@x")),
        log.event("u", lsn=350, ts_ms=3500, after=_c(5, "Ed", "e@x")),
    ])  # fmt: skip
    assert _current(spark, spec) == [(4, "Di", "d@x", "c", 500, _t(5000))]

    f, T = False, True
    assert _history(spark, spec) == [
        (None, None, None, "t", 400, _t(4000), None, f, T),
        (1, "Ann", "a@x", "c", 100, _t(1000), _t(1150), f, f),
        (1, "Ann", "old@x", "u", 115, _t(1150), _t(1200), f, f),
        (1, "Ann", "ann@x", "u", 120, _t(1200), _t(3100), f, f),
        (1, "Annie", "ann@x", "u", 310, _t(3100), _t(4000), f, f),
        (1, None, None, "t", 400, _t(4000), None, T, T),
        (2, "Bob", "b@x", "c", 110, _t(1100), _t(2000), f, f),
        (2, "Bobby", "b@x", "u", 200, _t(2000), _t(3000), f, f),
        (2, None, None, "d", 300, _t(3000), None, T, T),
        (3, "Cy", "c@x", "c", 320, _t(3200), _t(3900), f, f),
        (3, "Cy", "cy@x", "u", 390, _t(3900), _t(4000), f, f),
        (3, None, None, "t", 400, _t(4000), None, T, T),
        (4, "Di", "d@x", "c", 500, _t(5000), None, T, f),
        (5, "Ed", "e@x", "u", 350, _t(3500), _t(4000), f, f),
        (5, None, None, "t", 400, _t(4000), None, T, T),
    ]


def test_the_stream_follows_bronze_across_restarts_exactly_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    spec, log = _spec(spark)
    log.append(spark, spec.bronze_table, [
        log.event("c", lsn=10, ts_ms=1000, after=_c(1, "Ann", "a@x")),
        log.event("c", lsn=20, ts_ms=2000, after=_c(2, "Bob", "b@x")),
    ])  # fmt: skip

    def run() -> None:
        loader = SilverLoader(spark, spec, checkpoint_dir=str(tmp_path))
        query = loader.start(available_now=True)
        query.awaitTermination()
        assert query.exception() is None

    run()
    assert _current(spark, spec) == [
        (1, "Ann", "a@x", "c", 10, _t(1000)),
        (2, "Bob", "b@x", "c", 20, _t(2000)),
    ]
    # The connector replays lsn 20 after a crash, then goes on.
    log.append(spark, spec.bronze_table, [
        log.event("c", lsn=20, ts_ms=2000, after=_c(2, "Bob", "b@x")),
        log.event("d", lsn=30, ts_ms=3000, before=_c(1, None, None)),
    ])  # fmt: skip
    run()  # a restart from the checkpoint reads only the new bronze rows
    assert _current(spark, spec) == [(2, "Bob", "b@x", "c", 20, _t(2000))]
    assert len(_history(spark, spec)) == 3


def test_a_table_whose_creation_was_killed_before_the_metastore_knew_it_is_created_again(
    spark: SparkSession, tmp_path: Path
) -> None:
    spec, log = _spec(spark)
    log.append(spark, spec.bronze_table, [
        log.event("c", lsn=10, ts_ms=1000, after=_c(1, "Ann", "a@x")),
    ])  # fmt: skip
    # A loader killed while creating the current table: Delta had committed its first
    # version at the table's location, the metastore had not registered it yet.
    spark.sql("CREATE DATABASE IF NOT EXISTS silver")
    silver = spark.catalog.getDatabase("silver").locationUri.rstrip("/")
    name = spec.current_table.split(".")[1]
    spark.range(1).write.format("delta").save(f"{silver}/{name}")
    assert not spark.catalog.tableExists(spec.current_table)

    query = SilverLoader(spark, spec, checkpoint_dir=str(tmp_path)).start(available_now=True)
    query.awaitTermination()
    assert query.exception() is None

    assert _current(spark, spec) == [(1, "Ann", "a@x", "c", 10, _t(1000))]
    # What the interrupted creation left is kept aside, not deleted.
    [aside] = Path(silver.removeprefix("file:")).glob(f"{name}.interrupted-*")
    assert (aside / "_delta_log" / "00000000000000000000.json").exists()


def test_unavailable_markers_are_found_in_text_bytes_and_array_columns(
    spark: SparkSession,
) -> None:
    from pyspark.sql.types import ArrayType, BinaryType

    from spark_loaders.silver.changes import events

    row = [
        ("id", LongType()),
        ("note", StringType()),
        ("blob", BinaryType()),
        ("tags", ArrayType(StringType())),
    ]
    log = ChangeLog(table="docs", row=row)
    marker = UNAVAILABLE_VALUE
    frame = log.frame(spark, [
        log.event("u", lsn=1, ts_ms=1, after={"id": 1, "note": marker,
                  "blob": marker.encode(), "tags": [marker]}),
        log.event("u", lsn=2, ts_ms=2, after={"id": 2, "note": "x", "blob": b"y", "tags": []}),
        log.event("c", lsn=3, ts_ms=3, after={"id": 3, "note": marker}),
    ])  # fmt: skip
    spec = ChangelogSpec("bronze.unused", "silver.unused", ("id",))
    found = {r["id"]: r["_hub_unavailable"] for r in events(frame, spec).collect()}
    # Only updates leave columns out; a create holding the text is taken as it is.
    assert found == {1: ["note", "blob", "tags"], 2: [], 3: []}


def test_a_loader_follows_the_changelog_tables_of_its_own_topics_only(
    spark: SparkSession, api_url: str, admin_key: str, loader_settings: LoaderSettings
) -> None:
    # Two changelog tables in the shared metastore; a loader of one topic follows only it.
    domain = f"own{uuid.uuid4().hex[:8]}"
    mine, theirs = f"{domain}.mine", f"{domain}.theirs"
    key = {"type": "record", "name": "Key", "fields": [{"name": "id", "type": "long"}]}
    for topic in (mine, theirs):
        register(api_url, admin_key, f"{topic}-key", key)
        register(api_url, admin_key, f"{topic}-value", json.loads(schema_text("demo.customers")))
        ChangeLog(table="customers", row=ROW).append(spark, f"bronze.{_suffix(topic)}", [])
    of_mine = loader_settings.model_copy(update={"topic_pattern": re.escape(mine)})

    found = [spec.bronze_table for spec in discover(spark, of_mine)]
    everyone = [spec.bronze_table for spec in discover(spark, loader_settings)]

    assert found == [f"bronze.{_suffix(mine)}"]
    assert {f"bronze.{_suffix(mine)}", f"bronze.{_suffix(theirs)}"} <= set(everyone)


def _suffix(topic: str) -> str:
    return table_suffix(TopicName(topic))


def test_silver_tables_carry_the_feeds_of_their_bronze_table(spark: SparkSession) -> None:
    spec, log = _spec(spark)
    loader = SilverLoader(spark, spec, checkpoint_dir="/unused")
    loader._ensure_tables()  # bronze names no feed yet: silver names none either
    assert FEEDS_PROPERTY not in catalog_properties(spark, spec.current_table)

    stamp_feeds(spark, spec.bronze_table, ["shop.customers"])
    event = log.event("c", lsn=1, ts_ms=1000, after=_c(1, "Ann", "a@x"))
    loader.apply(log.frame(spark, [event]), 1)

    for table in (spec.current_table, spec.history_table):
        assert catalog_properties(spark, table)[FEEDS_PROPERTY] == "shop.customers"
