"""Publish change events and orders through the gateway → bronze → silver → the star schema."""

import random
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession

from hub_cli import demo
from hub_core.errors import ErrorCode, HubError
from hub_core.naming import TopicName, table_suffix
from hub_kafka.settings import KafkaSettings
from spark_loaders.control.row_lookup import row_position
from spark_loaders.runner.downstream import build_model
from spark_loaders.settings import LoaderSettings
from tests.support.hub_client import create_feed, publish, unique_topic
from tests.support.loader import land_once

pytestmark = pytest.mark.e2e

T0 = 1_750_000_000_000  # ms


def _change(op: str, table: str, after: dict[str, Any], ms: int) -> dict[str, Any]:
    value = demo.change_event(op, table, None, after)
    value["ts_ms"] = value["source"]["ts_ms"] = ms
    return value


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def test_demo_feeds_build_a_star_schema_with_a_late_customer(
    api_url: str,
    kafka_bootstrap: str,
    team_key: Callable[[str], str],
    spark: SparkSession,
    loader_settings: LoaderSettings,
    tmp_path: Path,
) -> None:
    key = team_key(demo.TEAM)
    topics = {name: unique_topic(demo.TEAM) for name in ("customers", "products", "orders")}
    for name, topic in topics.items():
        create_feed(api_url, key, topic=topic, schema=demo.schema_text(f"demo.{name}"),
                    owner=demo.TEAM)  # fmt: skip
    suffix = table_suffix(TopicName(topics["orders"])).split("_")[-1]
    model = tmp_path / "model.yaml"
    model.write_text(
        yaml.safe_dump(
            {
                "dimensions": [
                    {"name": f"customer_{suffix}", "source": topics["customers"],
                     "business_key": ["customer_id"], "attributes": ["name", "country"]},
                    {"name": f"product_{suffix}", "source": topics["products"],
                     "business_key": ["sku"], "attributes": ["name"], "scd_type": 1},
                ],
                "facts": [
                    {"name": f"orders_{suffix}", "source": topics["orders"],
                     "grain": ["order_id"], "event_time": "ordered_at",
                     "measures": ["amount"],
                     "dimensions": [
                         {"dimension": f"customer_{suffix}",
                          "columns": {"customer_id": "customer_id"}},
                         {"dimension": f"product_{suffix}",
                          "columns": {"product_sku": "sku"}},
                     ]},
                ],
            }
        )
    )  # fmt: skip

    def send(name: str, records: list[dict[str, Any]], keys: list[str | None]) -> None:
        body = [{"key": k, "value": v} for k, v in zip(keys, records, strict=True)]
        response = publish(api_url, key, topics[name], body)
        assert response.status_code == 200, response.text

    # A loader of this test's topics alone, as a team's own loader would run: the session's
    # Kafka and metastore hold every other test's topics and tables too.
    settings = loader_settings.model_copy(
        update={
            "topic_pattern": "|".join(re.escape(topic) for topic in topics.values()),
            "checkpoint_dir": tmp_path / "checkpoints",
        }
    )

    def land_and_build() -> None:
        kafka = KafkaSettings(bootstrap_servers=kafka_bootstrap)
        land_once(spark, settings, kafka)
        build_model(spark, settings, model)

    product = {"sku": "ESP-100", "name": "Espresso machine", "category": "coffee",
               "list_price": "249.00"}  # fmt: skip
    send("products", [_change("r", "products", product, T0)], ["ESP-100"])
    first = {"customer_id": 1, "name": "Customer 1", "email": "c1@example.com", "country": "SE"}
    send("customers", [_change("r", "customers", first, T0)], ["1"])
    order_1 = demo.order(random.Random(1), 7) | {"ordered_at": _iso(T0 + 1_000)}
    send("orders", [order_1], [None])
    land_and_build()

    customers = f"gold.dim_customer_{suffix}"
    columns = f"customer_{suffix}_key, customer_id, name, country, is_current, is_inferred"
    rows = sorted(tuple(r) for r in spark.sql(f"SELECT {columns} FROM {customers}").collect())
    assert rows == [
        (-1, None, None, None, True, False),
        (1, 1, "Customer 1", "SE", True, False),
        (2, 7, None, None, True, True),  # customer 7 has an order but no row yet
    ]
    # An inferred member holds no source change yet: its lineage says so.
    with pytest.raises(HubError, match="inferred member") as inferred:
        row_position(spark, customers, {f"customer_{suffix}_key": 2})
    assert inferred.value.code is ErrorCode.LINEAGE_NOT_FOUND

    # The customer's row arrives after the order; then the customer moves; then a new order.
    customer = {"customer_id": 7, "name": "Customer 7", "email": "c7@example.com"}
    send("customers", [
        _change("c", "customers", customer | {"country": "DE"}, T0 + 2_000),
        _change("u", "customers", customer | {"country": "FR"}, T0 + 3_000),
    ], ["7", "7"])  # fmt: skip
    order_2 = demo.order(random.Random(2), 7) | {"ordered_at": _iso(T0 + 4_000)}
    send("orders", [order_2], [None])
    land_and_build()

    rows = sorted(tuple(r) for r in spark.sql(f"SELECT {columns} FROM {customers}").collect())
    assert rows == [
        (-1, None, None, None, True, False),
        (1, 1, "Customer 1", "SE", True, False),
        (2, 7, "Customer 7", "DE", False, False),  # the inferred member, completed in place
        (3, 7, "Customer 7", "FR", True, False),
    ]
    facts = spark.sql(
        f"SELECT order_id, customer_{suffix}_key, product_{suffix}_key "
        f"FROM gold.fact_orders_{suffix}"
    ).collect()
    assert sorted(tuple(r) for r in facts) == sorted(
        [(order_1["order_id"], 2, 1), (order_2["order_id"], 3, 1)]
    )

    # Every gold row traces by its key to the bronze record it was built from (the loader's
    # `GET /row`): a fact to its order, a dimension version to the change that started it.
    def record(table: str, key: dict[str, Any]) -> dict[str, Any]:
        found = row_position(spark, table, key)
        bronze = spark.table(found["bronze_table"]).where(
            f"_hub_partition = {found['partition']} AND _hub_offset = {found['offset']}"
        )
        return bronze.first().asDict(recursive=True)  # type: ignore[union-attr]

    orders = f"gold.fact_orders_{suffix}"
    for order in (order_1, order_2):
        landed = record(orders, {"order_id": order["order_id"]})
        assert (landed["order_id"], landed["customer_id"]) == (order["order_id"], 7)
    completed = record(customers, {f"customer_{suffix}_key": 2})  # the first version, in place
    assert (completed["op"], completed["after"]["country"]) == ("c", "DE")
    moved = record(customers, {f"customer_{suffix}_key": 3})
    assert (moved["op"], moved["after"]["country"]) == ("u", "FR")
    assert record(customers, {"customer_id": 7}) == moved  # a member's newest version
    assert record(f"gold.dim_product_{suffix}", {"sku": "ESP-100"})["after"]["sku"] == "ESP-100"
    with pytest.raises(HubError, match="unknown member"):
        row_position(spark, customers, {f"customer_{suffix}_key": -1})
    with pytest.raises(HubError, match="has no column 'nope'") as unknown:
        row_position(spark, orders, {"nope": 1})
    assert unknown.value.code is ErrorCode.INVALID_ROW_KEY
    with pytest.raises(HubError, match="More than one row") as several:
        row_position(spark, orders, {f"product_{suffix}_key": 1})  # both orders' product
    assert several.value.code is ErrorCode.INVALID_ROW_KEY
