"""JDBC NUMERIC columns become Avro decimals only where the loader can land them."""

import pytest
from sqlalchemy import types as sa

from connectors.jdbc.types import avro_type

pytestmark = pytest.mark.unit


def test_a_numeric_within_38_digits_is_a_decimal() -> None:
    assert avro_type(sa.Numeric(38, 18)) == {
        "type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 18,
    }  # fmt: skip


@pytest.mark.parametrize(
    "column", [sa.Numeric(), sa.Numeric(40, 18), sa.Numeric(4, 6)], ids=["unbounded", "40", "scale"]
)
def test_a_numeric_no_spark_decimal_holds_is_carried_as_text(column: sa.Numeric[float]) -> None:
    assert avro_type(column) == "string"
