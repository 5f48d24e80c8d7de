"""Star schemas (`gold.dim_*`, `gold.fact_*`) built from a declarative YAML model."""
