"""Star schemas from a model: inferred members completed in place, facts on the right versions,
and one table's failure kept to it and to the facts that depend on it."""

import logging
import threading
import uuid
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    DecimalType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from typer.testing import CliRunner

from catalog.lineage import LineageStore, LineageSync
from hub_cli.main import app
from hub_core.ledger import LedgerEntry, LedgerKind, TableRead, decode
from hub_core.naming import TopicName, table_suffix
from spark_loaders.silver.changes import ChangelogSpec
from spark_loaders.silver.loader import SilverLoader
from spark_loaders.tables.delta_tables import FEEDS_PROPERTY, catalog_properties
from spark_loaders.tables.lineage import USER_METADATA_CONF, delta_table_id
from spark_loaders.warehouse.build import BuildStopped, WarehouseBuilder
from spark_loaders.warehouse.errors import WarehouseSourceNotFound
from spark_loaders.warehouse.model import parse_model
from spark_loaders.warehouse.status import GoldStatusBook
from tests.support.changelog import METADATA, ChangeLog

pytestmark = pytest.mark.integration

ORDERS = StructType(
    [
        StructField("order_id", StringType(), False),
        StructField("customer_id", LongType(), True),
        StructField("product_sku", StringType(), True),
        StructField("quantity", IntegerType(), False),
        StructField("amount", DecimalType(12, 2), False),
        StructField("ordered_at", TimestampType(), False),
        *METADATA,
    ]
)
EPOCH = 1_700_000_000_000


def _t(seconds: int) -> datetime:
    return datetime.fromtimestamp((EPOCH + seconds * 1000) / 1000, UTC).replace(tzinfo=None)


class Shop:
    """Bronze tables of one test's customers, products and orders, and their silver loaders."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.domain = f"w{uuid.uuid4().hex[:8]}"
        spark.sql("CREATE DATABASE IF NOT EXISTS bronze")
        self.customers = self._changelog(
            "customers",
            [("customer_id", LongType()), ("name", StringType()), ("country", StringType())],
            "customer_id",
        )
        self.products = self._changelog(
            "products", [("sku", StringType()), ("name", StringType())], "sku"
        )
        self.offset = 0

    def _changelog(self, name: str, row: Any, key: str) -> tuple[ChangeLog, SilverLoader]:
        suffix = table_suffix(TopicName(f"{self.domain}.{name}"))
        log = ChangeLog(table=name, row=row)
        log.append(self.spark, f"bronze.{suffix}", [])
        spec = ChangelogSpec(f"bronze.{suffix}", f"silver.{suffix}", (key,))
        loader = SilverLoader(self.spark, spec, checkpoint_dir="/unused")
        loader._ensure_tables()
        return log, loader

    def change(self, which: str, op: str, seconds: int, after: dict[str, Any]) -> None:
        log, loader = self.customers if which == "customers" else self.products
        lsn = EPOCH + seconds
        event = log.event(op, lsn=lsn, ts_ms=EPOCH + seconds * 1000, after=after)
        loader.apply(log.frame(self.spark, [event]), lsn)

    def order(self, order_id: str, customer: int | None, sku: str | None, seconds: int) -> None:
        self.offset += 1
        now = datetime.now(UTC)
        row = (order_id, customer, sku, 1, Decimal("9.50"), _t(seconds),
               None, 0, self.offset, now, 1, now, date.today())  # fmt: skip
        self.spark.createDataFrame([row], ORDERS).write.format("delta").mode("append").saveAsTable(
            f"bronze.{self.domain}_orders"
        )

    def model(self) -> Any:
        return parse_model(
            {
                "dimensions": [
                    {"name": f"{self.domain}_customer", "source": f"{self.domain}.customers",
                     "business_key": ["customer_id"], "attributes": ["name", "country"],
                     "scd_type": 2},
                    {"name": f"{self.domain}_product", "source": f"{self.domain}.products",
                     "business_key": ["sku"], "attributes": ["name"], "scd_type": 1},
                ],
                "facts": [
                    {"name": f"{self.domain}_orders", "source": f"{self.domain}.orders",
                     "grain": ["order_id"], "event_time": "ordered_at", "measures": ["amount"],
                     "dimensions": [
                         {"dimension": f"{self.domain}_customer",
                          "columns": {"customer_id": "customer_id"}},
                         {"dimension": f"{self.domain}_product",
                          "columns": {"product_sku": "sku"}},
                     ]},
                ],
            },
            source="test.yaml",
        )  # fmt: skip

    def rows(self, table: str, columns: str) -> list[tuple[Any, ...]]:
        kind = "fact" if table == "orders" else "dim"
        found = self.spark.sql(f"SELECT {columns} FROM gold.{kind}_{self.domain}_{table}")
        return sorted(tuple(r) for r in found.collect())


def test_late_dimension_rows_complete_inferred_members_and_facts_follow_versions(
    spark: SparkSession,
) -> None:
    shop = Shop(spark)
    builder = WarehouseBuilder(spark, shop.model(), source="test.yaml")
    customer = "customer_key, customer_id, name, country, valid_from, valid_to, is_current, " \
        "is_inferred"  # fmt: skip
    customer = customer.replace("customer_key", f"{shop.domain}_customer_key")
    product = f"{shop.domain}_product_key, sku, name, is_inferred"
    facts = f"order_id, {shop.domain}_customer_key, {shop.domain}_product_key, amount"
    start = datetime(1900, 1, 1)

    shop.change("customers", "c", 100, {"customer_id": 1, "name": "Ann", "country": "DE"})
    shop.change("products", "c", 100, {"sku": "A", "name": "Apple"})
    shop.order("o1", 1, "A", 150)
    shop.order("o2", 2, "B", 160)  # customer 2 and product B are not known yet
    shop.order("o3", None, "A", 170)  # no customer: the unknown member
    builder.build()

    # Each gold table names the feeds it is built from: read grants follow the strictest.
    fact_feeds = catalog_properties(spark, f"gold.fact_{shop.domain}_orders")[FEEDS_PROPERTY]
    dim_feeds = catalog_properties(spark, f"gold.dim_{shop.domain}_customer")[FEEDS_PROPERTY]
    assert fact_feeds == ",".join(f"{shop.domain}.{t}" for t in ("customers", "orders", "products"))
    assert dim_feeds == f"{shop.domain}.customers"

    assert shop.rows("customer", customer) == [
        (-1, None, None, None, start, None, True, False),
        (1, 1, "Ann", "DE", start, None, True, False),
        (2, 2, None, None, start, None, True, True),
    ]
    assert shop.rows("product", product) == [
        (-1, None, None, False),
        (1, "A", "Apple", False),
        (2, "B", None, True),
    ]
    assert shop.rows("orders", facts) == [
        ("o1", 1, 1, Decimal("9.50")),
        ("o2", 2, 2, Decimal("9.50")),
        ("o3", -1, 1, Decimal("9.50")),
    ]

    # Customer 2 arrives after its order; customer 1 moves (a new SCD2 version).
    shop.change("customers", "c", 165, {"customer_id": 2, "name": "Bo", "country": "SE"})
    shop.change("customers", "u", 200, {"customer_id": 1, "name": "Ann", "country": "FR"})
    shop.change("products", "c", 210, {"sku": "B", "name": "Banana"})
    shop.order("o4", 1, "B", 250)
    # The loader begins stopping: the pass starts no table, and the next pass builds them.
    stopping = threading.Event()
    stopping.set()
    before = shop.rows("customer", customer), shop.rows("orders", facts)
    with pytest.raises(BuildStopped):
        builder.build(stop=stopping)
    assert (shop.rows("customer", customer), shop.rows("orders", facts)) == before
    builder.build()

    expected_customers = [
        (-1, None, None, None, start, None, True, False),
        (1, 1, "Ann", "DE", start, _t(200), False, False),
        (2, 2, "Bo", "SE", start, None, True, False),  # completed in place, same key
        (3, 1, "Ann", "FR", _t(200), None, True, False),
    ]
    expected_facts = [
        ("o1", 1, 1, Decimal("9.50")),  # before the move: the DE version
        ("o2", 2, 2, Decimal("9.50")),
        ("o3", -1, 1, Decimal("9.50")),
        ("o4", 3, 2, Decimal("9.50")),  # after the move: the FR version
    ]
    assert shop.rows("customer", customer) == expected_customers
    assert shop.rows("product", product) == [
        (-1, None, None, False),
        (1, "A", "Apple", False),
        (2, "B", "Banana", False),
    ]
    assert shop.rows("orders", facts) == expected_facts

    # A rebuild over the same data renumbers nothing and changes nothing.
    builder.build()
    assert shop.rows("customer", customer) == expected_customers
    assert shop.rows("orders", facts) == expected_facts


def test_a_model_naming_a_missing_column_says_which_and_the_choices(spark: SparkSession) -> None:
    shop = Shop(spark)
    model = shop.model().model_copy(deep=True)
    data = model.model_dump(mode="json")
    data["dimensions"][0]["attributes"] = ["name", "region"]
    with pytest.raises(WarehouseSourceNotFound) as caught:
        WarehouseBuilder(
            spark, parse_model(data, source="m.yaml"), source="m.yaml"
        ).build().raise_first()
    message = caught.value.message
    assert "m.yaml: dimensions[0].attributes: column 'region' is not in silver." in message
    assert "valid choices: customer_id, name, country" in message


def test_a_table_that_fails_stops_neither_other_models_nor_the_tables_not_depending_on_it(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ours, theirs = Shop(spark), Shop(spark)
    for shop in (ours, theirs):
        shop.change("customers", "c", 100, {"customer_id": 1, "name": "Ann", "country": "DE"})
        shop.change("products", "c", 100, {"sku": "A", "name": "Apple"})
        shop.order("o1", 1, "A", 150)
    # Someone made a table by hand under the name of their product dimension: not Delta, and
    # without the dimension's columns, so refreshing that dimension fails.
    taken = f"gold.dim_{theirs.domain}_product"
    spark.sql("CREATE DATABASE IF NOT EXISTS gold")
    spark.sql(f"CREATE TABLE {taken} (sku STRING, label STRING) USING parquet")
    statuses = GoldStatusBook.in_checkpoints(tmp_path)
    builders = [
        WarehouseBuilder(spark, shop.model(), source=f"{shop.domain}.yaml", statuses=statuses)
        for shop in (theirs, ours)  # the failing model first: it must not stop the other
    ]
    fact = f"order_id, {ours.domain}_customer_key, {ours.domain}_product_key, amount"

    with caplog.at_level(logging.INFO, logger="spark_loaders.warehouse"):
        failing, landing = [builder.build() for builder in builders]

    assert ours.rows("orders", fact) == [("o1", 1, 1, Decimal("9.50"))]
    assert landing.failed == {} and landing.skipped == {}
    assert list(failing.failed) == [taken]
    their_facts = f"gold.fact_{theirs.domain}_orders"
    assert list(failing.skipped) == [their_facts]
    assert not spark.catalog.tableExists(their_facts)  # no facts keyed on a missing dimension
    their_customers = f"{theirs.domain}_customer_key, customer_id, name"
    assert theirs.rows("customer", their_customers) == [(-1, None, None), (1, 1, "Ann")]
    errors = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.ERROR and r.name.startswith("spark_loaders")
    ]
    assert len(errors) == 1 and taken in errors[0] and f"{theirs.domain}.yaml" in errors[0]

    states = {s.table: (s.state, s.reason_code) for s in statuses.list()}
    assert states[taken] == ("failed", "BUILD_FAILED")
    assert states[their_facts] == ("skipped", "DIMENSION_NOT_BUILT")
    assert states[f"gold.dim_{theirs.domain}_customer"] == ("built", None)
    assert states[f"gold.fact_{ours.domain}_orders"] == ("built", None)
    shown = CliRunner().invoke(
        app, ["load", "status"], env={"HUB_LOADER_CHECKPOINT_DIR": str(tmp_path)}
    )
    assert shown.exit_code == 1, shown.output
    assert f"{taken} ({theirs.domain}.yaml): failed" in shown.output
    assert f"{their_facts} ({theirs.domain}.yaml): skipped" in shown.output

    # Once the name is free again, the next pass builds their model whole.
    spark.sql(f"DROP TABLE {taken}")
    failing = builders[0].build()

    assert failing.failed == {} and failing.skipped == {}
    their_fact = f"order_id, {theirs.domain}_customer_key, {theirs.domain}_product_key, amount"
    assert theirs.rows("orders", their_fact) == [("o1", 1, 1, Decimal("9.50"))]
    assert {s.state for s in statuses.list()} == {"built"}


def _gold_entries(spark: SparkSession, table: str) -> dict[int, LedgerEntry | None]:
    """Each commit of `table` and the ledger entry it carries."""
    history = DeltaTable.forName(spark, table).history().select("version", "userMetadata")
    return {row["version"]: decode(row["userMetadata"]) for row in history.collect()}


def _read(spark: SparkSession, table: str, first: int, last: int) -> TableRead:
    """What an entry names of `table`'s versions `first`..`last`: with the table's id."""
    return TableRead(table, first, last, delta_table_id(spark, table))


def _version(spark: SparkSession, table: str) -> int:
    return int(DeltaTable.forName(spark, table).history(1).head()["version"])  # type: ignore[index]


def test_gold_commits_name_the_source_versions_they_read_and_an_unchanged_build_commits_none(
    spark: SparkSession, tmp_path: Path
) -> None:
    shop = Shop(spark)
    builder = WarehouseBuilder(spark, shop.model(), source="test.yaml")
    history = f"silver.{shop.domain}_customers_history"
    bronze = f"bronze.{shop.domain}_orders"
    customers, facts = f"gold.dim_{shop.domain}_customer", f"gold.fact_{shop.domain}_orders"
    shop.change("customers", "c", 100, {"customer_id": 1, "name": "Ann", "country": "DE"})
    shop.change("products", "c", 100, {"sku": "A", "name": "Apple"})
    shop.order("o1", 1, "A", 150)
    builder.build()
    first_history, first_bronze = _version(spark, history), _version(spark, bronze)

    # Every commit of the build carries the entry; the versions named are the ones read.
    # A new dimension's first commit holds only its unknown member, read from no source.
    dim_entries = _gold_entries(spark, customers)
    assert dim_entries[0] is None
    assert {e for e in dim_entries.values() if e is not None} == {
        LedgerEntry(LedgerKind.GOLD, reads=(_read(spark, history, 0, first_history),))
    }
    # A fact also names the dimension versions it looked its keys up in.
    products = f"gold.dim_{shop.domain}_product"
    first_customers, first_products = _version(spark, customers), _version(spark, products)
    fact_entry = LedgerEntry(
        LedgerKind.GOLD,
        reads=(
            _read(spark, bronze, 0, first_bronze),
            _read(spark, customers, 0, first_customers),
            _read(spark, products, 0, first_products),
        ),
    )
    assert set(_gold_entries(spark, facts).values()) == {fact_entry}

    # Nothing changed: no commit, so no entry.
    built = (_version(spark, customers), _version(spark, facts))
    builder.build()
    assert (_version(spark, customers), _version(spark, facts)) == built, [
        (r["version"], r["operation"], r["operationMetrics"])
        for t in (customers, facts)
        for r in DeltaTable.forName(spark, t).history().collect()
    ]

    # The next entries start after the versions the previous ones read, also for a builder
    # that starts over (a restarted loader), which finds them in the tables' history.
    shop.change("customers", "u", 200, {"customer_id": 1, "name": "Ann", "country": "FR"})
    shop.order("o2", 1, "A", 250)
    WarehouseBuilder(spark, shop.model(), source="test.yaml").build()
    newest = _gold_entries(spark, customers)[_version(spark, customers)]
    assert newest == LedgerEntry(
        LedgerKind.GOLD, reads=(_read(spark, history, first_history + 1, _version(spark, history)),)
    )
    assert _gold_entries(spark, facts)[_version(spark, facts)] == LedgerEntry(
        LedgerKind.GOLD,
        reads=(
            _read(spark, bronze, first_bronze + 1, _version(spark, bronze)),
            _read(spark, customers, first_customers + 1, _version(spark, customers)),
            # The products did not change: the version read alone.
            _read(spark, products, first_products, first_products),
        ),
    )
    # The ledger entry stays with the builder's own session.
    assert spark.conf.get(USER_METADATA_CONF, None) is None


def test_a_dimension_source_change_leads_forward_to_the_facts_keyed_on_it_and_no_further(
    spark: SparkSession, loader_settings: Any, tmp_path: Path
) -> None:
    from hub_core.database import create_database_engine
    from migrations import migrate

    shop = Shop(spark)
    builder = WarehouseBuilder(spark, shop.model(), source="test.yaml")
    history = f"silver.{shop.domain}_customers_history"
    bronze = f"bronze.{shop.domain}_orders"
    customers, facts = f"gold.dim_{shop.domain}_customer", f"gold.fact_{shop.domain}_orders"
    shop.change("customers", "c", 100, {"customer_id": 1, "name": "Ann", "country": "DE"})
    shop.change("products", "c", 100, {"sku": "A", "name": "Apple"})
    shop.order("o1", 1, "A", 150)
    shop.order("o2", 2, "A", 160)  # customer 2 is not known yet: an inferred member
    builder.build()
    orders_landed = _version(spark, bronze)
    inferred, first_facts = _version(spark, customers), _version(spark, facts)

    # The inferred member comes from the orders alone, and names only them; the facts were
    # looked up in the dimension with it.
    assert _gold_entries(spark, customers)[inferred] == LedgerEntry(
        LedgerKind.GOLD, reads=(_read(spark, bronze, 0, orders_landed),)
    )
    fact_reads = _gold_entries(spark, facts)[first_facts]
    assert fact_reads is not None and _read(spark, customers, 0, inferred) in fact_reads.reads

    # Customer 1 moves: the dimension gets a version, and the next facts are keyed on it.
    shop.change("customers", "u", 200, {"customer_id": 1, "name": "Ann", "country": "FR"})
    moved = _version(spark, history)
    shop.order("o3", 1, "A", 250)
    builder.build()
    assert shop.rows("orders", f"order_id, {shop.domain}_customer_key")[-1] == ("o3", 3)

    database = tmp_path / "hub.db"
    migrate.upgrade(f"sqlite:///{database}")
    engine = create_database_engine(f"sqlite:///{database}")
    try:
        LineageSync(engine, loader_settings.warehouse_dir, min_interval_s=0).sync()
        store = LineageStore(engine)
        from_move = [(v.table, v.version) for v in store.downstream([(history, moved)])]
        from_orders = [(v.table, v.version) for v in store.downstream([(bronze, orders_landed)])]
    finally:
        engine.dispose()

    assert from_move == [(customers, _version(spark, customers)), (facts, _version(spark, facts))]
    # The first orders lead to the inferred member and the fact versions built with it (the
    # table's creation and its comment), not on through the dimension to later fact versions.
    assert from_orders == [(customers, inferred), *[(facts, v) for v in range(first_facts + 1)]]
