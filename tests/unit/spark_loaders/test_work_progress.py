"""The progress long operations report: a table's maintenance its OPTIMIZE and VACUUM, a
warehouse build each table of its model, counted whatever became of the table."""

from collections.abc import Callable
from typing import Any

import pytest

from spark_loaders.settings import LoaderSettings
from spark_loaders.tables.maintenance import TableMaintenance
from spark_loaders.warehouse.build import WarehouseBuilder
from spark_loaders.warehouse.errors import WarehouseSourceNotFound
from spark_loaders.warehouse.model import parse_model

pytestmark = pytest.mark.unit

Event = tuple[str, int, int | None]


class Heard:
    """A `WorkProgress` that keeps what it is told."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, step: str, done: int, total: int | None, /) -> None:
        self.events.append((step, done, total))


class _Answer:
    def __init__(self, first: dict[str, Any] | None = None) -> None:
        self._first = first

    def first(self) -> dict[str, Any] | None:
        return self._first

    def collect(self) -> list[dict[str, Any]]:
        return []


class _Conf:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.getAll: dict[str, str] = self.values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def unset(self, key: str) -> None:
        self.values.pop(key, None)

    def isModifiable(self, key: str) -> bool:
        return True


class _Context:
    defaultParallelism = 2


class FakeSpark:
    """The few calls maintenance and a builder's set-up make, with statements recorded;
    `fail` makes a statement starting with it raise."""

    def __init__(self, fail: str | None = None) -> None:
        self.statements: list[str] = []
        self.conf = _Conf()
        self.sparkContext = _Context()
        self._fail = fail

    def sql(self, statement: str) -> _Answer:
        self.statements.append(statement)
        if self._fail and statement.startswith(self._fail):
            raise RuntimeError(f"{self._fail} refused")
        return _Answer({"numFiles": 3, "sizeInBytes": 1_000})

    def newSession(self) -> "FakeSpark":
        return self


def test_maintaining_a_table_reports_optimize_then_vacuum_then_the_end() -> None:
    spark, heard = FakeSpark(), Heard()

    result = TableMaintenance(spark, LoaderSettings()).maintain(  # type: ignore[arg-type]
        "bronze.shop_orders", progress=heard
    )

    assert result.error is None
    assert heard.events == [
        ("OPTIMIZE bronze.shop_orders", 0, 2),
        ("VACUUM bronze.shop_orders", 1, 2),
        ("maintained bronze.shop_orders", 2, 2),
    ]
    assert [s.split()[0] for s in spark.statements if s.split()[0] in ("OPTIMIZE", "VACUUM")] == [
        "OPTIMIZE",
        "VACUUM",
    ]


def test_a_table_compacted_only_has_one_step() -> None:
    heard = Heard()

    TableMaintenance(FakeSpark(), LoaderSettings()).maintain(  # type: ignore[arg-type]
        "bronze.shop_orders", vacuum=False, progress=heard
    )

    assert heard.events == [
        ("OPTIMIZE bronze.shop_orders", 0, 1),
        ("maintained bronze.shop_orders", 1, 1),
    ]


def test_a_table_whose_optimize_fails_reports_no_further_step() -> None:
    heard = Heard()

    result = TableMaintenance(FakeSpark(fail="OPTIMIZE"), LoaderSettings()).maintain(  # type: ignore[arg-type]
        "bronze.shop_orders", progress=heard
    )

    assert result.error == "OPTIMIZE refused"
    assert heard.events == [("OPTIMIZE bronze.shop_orders", 0, 2)]


def _dimension(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "source": f"shop.{name}s",
        "business_key": [f"{name}_id"],
        "attributes": ["name"],
        "scd_type": 1,
    }


def _fact(name: str, *dimensions: str) -> dict[str, Any]:
    return {
        "name": name,
        "source": f"shop.{name}",
        "grain": [f"{name}_id"],
        "event_time": "at",
        "measures": ["amount"],
        "dimensions": [{"dimension": d, "columns": {f"{d}_id": f"{d}_id"}} for d in dimensions],
    }


def test_a_build_counts_each_table_of_its_model_whether_built_failed_or_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = parse_model(
        {
            "dimensions": [_dimension("customer"), _dimension("product"), _dimension("store")],
            "facts": [_fact("orders", "customer", "product"), _fact("visits", "customer")],
        },
        source="model.yaml",
    )
    outcomes: dict[str, Exception] = {
        "gold.dim_product": ValueError("a column of gold.dim_product cannot take the data"),
        "gold.dim_store": WarehouseSourceNotFound("silver.shop_stores_history does not exist"),
    }

    def recorded(
        self: WarehouseBuilder, table: str, *args: Any, **kwargs: Any
    ) -> Callable[[], None]:
        def build() -> None:
            if table in outcomes:
                raise outcomes[table]

        return build

    monkeypatch.setattr(WarehouseBuilder, "_recorded", recorded)
    monkeypatch.setattr(WarehouseBuilder, "_counts", lambda self, table: (10, 1))
    heard = Heard()

    report = WarehouseBuilder(FakeSpark(), model, source="model.yaml").build(  # type: ignore[arg-type]
        progress=heard
    )

    assert set(report.failed) == {"gold.dim_product"}
    assert set(report.waiting) == {"gold.dim_store"}
    assert set(report.skipped) == {"gold.fact_orders"}  # its product dimension failed
    assert heard.events == [
        ("building gold.dim_customer", 0, 5),
        ("building gold.dim_product", 1, 5),
        ("building gold.dim_store", 2, 5),
        ("building gold.fact_orders", 3, 5),
        ("building gold.fact_visits", 4, 5),
        ("counting the rows of gold.dim_customer", 5, 5),
        ("built 2 of 5 tables", 5, 5),
    ]
