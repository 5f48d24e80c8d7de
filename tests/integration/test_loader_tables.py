"""What the loader knows of a table it did not create in this process: the facts a restarted
loader reads before its first append, without sizing the table."""

import uuid
from typing import Any

import pytest

from spark_loaders.tables.comments import set_table_comment
from spark_loaders.tables.delta_tables import FEEDS_PROPERTY, DeltaTables, catalog_properties

pytestmark = pytest.mark.integration

TEXT = "it's ${env:HOME} \\ 'quoted'"


def _table(spark: Any, *, type_widening: bool) -> str:
    table = f"bronze.tables_{uuid.uuid4().hex[:8]}"
    spark.sql("CREATE DATABASE IF NOT EXISTS bronze")
    rows = spark.range(3).selectExpr("id", "cast(id as string) AS page", "current_date() AS day")
    writer = rows.write.format("delta").partitionBy("day")
    if type_widening:
        writer = writer.option("delta.enableTypeWidening", "true")
    writer.saveAsTable(table)
    return table


def test_an_existing_tables_location_columns_comment_and_widening_are_as_delta_says(
    spark: Any,
) -> None:
    table = _table(spark, type_widening=True)
    set_table_comment(spark, table, TEXT)
    detail = spark.sql(f"DESCRIBE DETAIL {table}").first()

    state = DeltaTables(spark).state(table)

    assert state is not None
    assert state.location == detail["location"]
    assert state.schema == spark.table(table).schema
    assert state.description == TEXT
    assert state.type_widening is True


def test_a_table_without_widening_or_comment_says_so_and_a_missing_one_is_none(
    spark: Any,
) -> None:
    table = _table(spark, type_widening=False)

    state = DeltaTables(spark).state(table)

    assert state is not None
    assert state.description is None
    assert state.type_widening is False
    assert [f.name for f in state.schema.fields] == ["id", "page", "day"]
    assert DeltaTables(spark).state(f"{table}_missing") is None


def test_a_table_carries_the_feed_of_its_rows_from_its_creation_and_an_older_one_is_stamped(
    spark: Any,
) -> None:
    tables = DeltaTables(spark)
    new = f"bronze.tables_{uuid.uuid4().hex[:8]}"
    rows = spark.range(2).selectExpr("id", "current_date() AS _hub_ingest_date")
    older = _table(spark, type_widening=False)

    tables.append(rows, new, app_id="t", version=0, partitioned=True, feed="shop.orders")
    tables.append(
        spark.range(1).selectExpr("id", "'x' AS page", "current_date() AS day"),
        older,
        app_id="t",
        version=0,
        partitioned=False,
        feed="shop.pages",
    )

    # The analysts' server applies read grants by this property (docs/security.md).
    assert catalog_properties(spark, new)[FEEDS_PROPERTY] == "shop.orders"
    assert catalog_properties(spark, older)[FEEDS_PROPERTY] == "shop.pages"
    assert DeltaTables(spark).state(older).feeds == "shop.pages"  # type: ignore[union-attr]
