"""Live schema evolution, quarantine with reasons, and replay, through the running bronze loader."""

from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_loaders.bronze.loader import BronzeLoader
from spark_loaders.bronze.replay import replay
from spark_loaders.runtime.lifecycle import stop_between_batches
from tests.support.loader import LoaderTopic, encode, live_count, produce
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e


def orders(*extra: dict[str, Any], qty: str = "int") -> dict[str, Any]:
    return {
        "type": "record",
        "name": "Order",
        "doc": "An order placed in the shop.",
        "fields": [
            {"name": "order_id", "type": "string", "doc": "Order number."},
            {"name": "qty", "type": qty},
            {"name": "ratio", "type": "int"},
            *extra,
        ],
    }


V1 = orders()
# Compatible: a new optional field, int -> long (automatic) and int -> double (ALTER) widenings.
V2 = {
    **orders({"name": "channel", "type": ["null", "string"], "default": None}, qty="long"),
    "fields": [
        {"name": "order_id", "type": "string", "doc": "Order number."},
        {"name": "qty", "type": "long"},
        {"name": "ratio", "type": "double"},
        {"name": "channel", "type": ["null", "string"], "default": None},
    ],
}
# Written under another subject: lacks `ratio`, which V2 needs (no default).
STRAY = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "order_id", "type": "string"}, {"name": "qty", "type": "int"}],
}
# The fix: V3 gives `ratio` a default, so STRAY records resolve.
V3 = {
    **V2,
    "fields": [
        {"name": "order_id", "type": "string", "doc": "Order number."},
        {"name": "qty", "type": "long"},
        {"name": "ratio", "type": "double", "default": 0.0},
        {"name": "channel", "type": ["null", "string"], "default": None},
    ],
}


def test_new_versions_are_picked_up_live_and_quarantine_is_replayed_exactly_once(
    spark: SparkSession, loader_topic: Callable[..., LoaderTopic]
) -> None:
    evo = loader_topic("evo")
    topic, table, quarantine, settings = evo.name, evo.table, evo.quarantine, evo.settings
    v1 = evo.register(V1)
    first = [{"order_id": f"a{i}", "qty": i, "ratio": 2 * i} for i in range(20)]
    evo.produce(v1, V1, first)
    unframed = produce(evo.kafka.bootstrap_servers, topic, [b"not avro at all"])[0]
    stray_id = evo.register(STRAY, subject=f"{topic}.stray-value")

    query = BronzeLoader(spark, settings, evo.kafka).start()
    try:
        wait_until(
            lambda: live_count(spark, table) == 20, timeout_s=120, what="v1 records in bronze"
        )
        assert dict(spark.table(table).dtypes)["qty"] == "int"

        # A new version is registered while the stream runs: no restart.
        v2 = evo.register(V2)
        second = [
            {"order_id": f"b{i}", "qty": 2**40 + i, "ratio": i + 0.5, "channel": "web"}
            for i in range(10)
        ]
        evo.produce(v2, V2, second)
        stray = evo.produce(stray_id, STRAY, [{"order_id": "s1", "qty": 7}])
        wait_until(
            lambda: live_count(spark, table) == 30, timeout_s=120, what="v2 records in bronze"
        )
        wait_until(
            lambda: live_count(spark, quarantine) == 2, timeout_s=60, what="quarantined rows"
        )
        assert query.exception() is None
    finally:
        stop_between_batches(query)

    types = dict(spark.table(table).dtypes)
    assert (types["qty"], types["ratio"], types["channel"]) == ("bigint", "double", "string")
    rows = {r["order_id"]: r for r in spark.table(table).collect()}
    assert rows["a3"]["qty"] == 3 and rows["a3"]["ratio"] == 6.0 and rows["a3"]["channel"] is None
    assert rows["b4"]["qty"] == 2**40 + 4 and rows["b4"]["ratio"] == 4.5
    assert rows["b4"]["channel"] == "web"
    assert rows["a3"]["_hub_schema_id"] == v1 and rows["b4"]["_hub_schema_id"] == v2
    described = {r["col_name"]: r["comment"] for r in spark.sql(f"DESCRIBE {table}").collect()}
    assert described["order_id"] == "Order number."

    held = {r["_hub_reason_code"]: r for r in spark.table(quarantine).collect()}
    assert set(held) == {"NOT_CONFLUENT_FRAMED", "SCHEMA_UNRESOLVABLE"}
    bad = held["NOT_CONFLUENT_FRAMED"]
    assert bytes(bad["_hub_value"]) == b"not avro at all"
    assert (bad["_hub_partition"], bad["_hub_offset"]) == unframed
    assert bad["_hub_topic"] == topic and bad["_hub_timestamp"] is not None
    unresolved = held["SCHEMA_UNRESOLVABLE"]
    assert unresolved["_hub_schema_id"] == stray_id and "ratio" in unresolved["_hub_reason"]

    # Before a fix, a replay lands nothing and keeps both reasons.
    result = replay(spark, settings, topic)
    assert (result.examined, result.landed) == (2, 0)

    evo.register(V3)
    for _ in range(2):  # running it twice lands the record once
        replay(spark, settings, topic)
    landed = spark.table(table).where("order_id = 's1'").collect()
    assert len(landed) == 1
    assert (landed[0]["_hub_partition"], landed[0]["_hub_offset"]) == stray[0]
    assert landed[0]["qty"] == 7 and landed[0]["ratio"] == 0.0
    assert live_count(spark, table) == 31
    [left] = spark.table(quarantine).collect()
    assert left["_hub_reason_code"] == "NOT_CONFLUENT_FRAMED" and left["_hub_attempts"] == 4


def test_a_type_change_delta_cannot_apply_is_quarantined_not_fatal(
    spark: SparkSession, loader_topic: Callable[..., LoaderTopic]
) -> None:
    evo = loader_topic("evo", partitions=1)
    v1 = evo.register(V1)
    evo.produce(v1, V1, [{"order_id": "a", "qty": 1, "ratio": 1}])
    evo.land(spark)
    # int -> float is an Avro promotion (the registry accepts it) that Delta cannot widen.
    as_float = orders(qty="float")
    v2 = evo.register(as_float)
    evo.produce(v2, as_float, [{"order_id": "b", "qty": 2.5, "ratio": 2}])
    evo.land(spark)

    table = evo.table
    assert [r["order_id"] for r in spark.table(table).collect()] == ["a"]
    [held] = spark.table(evo.quarantine).collect()
    assert held["_hub_reason_code"] == "TYPE_CHANGE_UNSUPPORTED"
    assert "qty int -> float" in held["_hub_reason"]
    assert bytes(held["_hub_value"])[5:] == encode(
        as_float, {"order_id": "b", "qty": 2.5, "ratio": 2}
    )


def test_records_of_a_writer_registered_under_another_subject_land_beside_the_topics_own(
    spark: SparkSession, loader_topic: Callable[..., LoaderTopic]
) -> None:
    # Producers using another subject name strategy frame records with ids of their own
    # subject; the topic's newest version reads them, so they land, in a commit of their own.
    mixed = loader_topic("mixed")
    own = mixed.register(V1)
    other = mixed.register(STRAY, subject=f"{mixed.name}.Order-value")
    mixed.register(V3)
    mixed.produce(own, V1, [{"order_id": "o1", "qty": 1, "ratio": 0.5}])
    mixed.produce(other, STRAY, [{"order_id": "s1", "qty": 2}, {"order_id": "s2", "qty": 3}])
    mixed.land(spark)
    mixed.land(spark)  # nothing new: nothing twice

    rows = {r["order_id"]: r for r in spark.table(mixed.table).collect()}
    assert sorted(rows) == ["o1", "s1", "s2"]
    assert (rows["o1"]["_hub_schema_id"], rows["s1"]["_hub_schema_id"]) == (own, other)
    assert rows["s2"]["qty"] == 3 and rows["s2"]["ratio"] == 0.0
    assert live_count(spark, mixed.quarantine) == 0
