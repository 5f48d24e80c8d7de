"""Star schemas (`gold.dim_*`, `gold.fact_*`) built from a declarative YAML model."""

from spark_loaders.warehouse.build import BuildReport, WarehouseBuilder, build_model
from spark_loaders.warehouse.model import WarehouseModel, load_model, parse_model

__all__ = [
    "BuildReport",
    "WarehouseBuilder",
    "WarehouseModel",
    "build_model",
    "load_model",
    "parse_model",
]
