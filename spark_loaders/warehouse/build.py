"""Building a model's star schemas: dimensions first (with their silver tables), then facts."""

import logging
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from spark_loaders.settings import LoaderSettings
from spark_loaders.silver.loader import start_silver
from spark_loaders.warehouse.dimensions import DimensionBuilder, dim_table
from spark_loaders.warehouse.facts import FactBuilder, fact_table
from spark_loaders.warehouse.model import WarehouseModel, load_model

log = logging.getLogger(__name__)


@dataclass
class BuildReport:
    """Rows per gold table after a build, and how many dimension members are still inferred."""

    rows: dict[str, int] = field(default_factory=dict)
    inferred: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        parts = []
        for table, count in self.rows.items():
            pending = self.inferred.get(table)
            parts.append(f"{table}: {count} rows" + (f" ({pending} inferred)" if pending else ""))
        return ", ".join(parts)


class WarehouseBuilder:
    """Refreshes every dimension and fact table of one model from silver and bronze."""

    def __init__(self, spark: SparkSession, model: WarehouseModel, *, source: str) -> None:
        self._spark = spark
        self._model = model
        self._dimensions = {
            d.name: DimensionBuilder(spark, d, where=f"{source}: dimensions[{i}]")
            for i, d in enumerate(model.dimensions)
        }
        self._facts = [
            FactBuilder(spark, model, f, self._dimensions, where=f"{source}: facts[{i}]")
            for i, f in enumerate(model.facts)
        ]

    def build(self) -> BuildReport:
        """One incremental pass: only rows that changed are written."""
        report = BuildReport()
        for name, dimension in self._dimensions.items():
            dimension.refresh()
            log.info("dimension %s refreshed", name)
        for fact, builder in zip(self._model.facts, self._facts, strict=True):
            report.rows[fact_table(fact)] = builder.refresh()
            log.info("fact %s refreshed", fact.name)
        for dim in self._model.dimensions:
            table = self._spark.table(dim_table(dim))
            report.rows[dim_table(dim)] = table.count()
            report.inferred[dim_table(dim)] = table.where("is_inferred").count()
        return report


def build_model(spark: SparkSession, settings: LoaderSettings, path: Path) -> BuildReport:
    """Catch silver up with bronze, then build the model at `path` once."""
    model = load_model(path)
    running: dict[str, StreamingQuery] = {}
    for query in start_silver(spark, settings, running=running, available_now=True):
        query.awaitTermination()
        if query.exception() is not None:
            raise query.exception()  # type: ignore[misc]
    report = WarehouseBuilder(spark, model, source=str(path)).build()
    log.info("warehouse built from %s: %s", path, report.describe())
    return report
