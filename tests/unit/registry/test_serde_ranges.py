"""Numbers at the edges of their Avro types: in range encoded, out of range a 42220 at the field."""

from decimal import Decimal

import pytest

from registry.errors import InvalidRecord
from registry.serde import to_datum

pytestmark = pytest.mark.unit

DECIMAL_38_10 = {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 10}


@pytest.mark.parametrize(
    "text",
    ["12345678901234567890.0123456789", "9" * 28 + ".9999999999", "-" + "9" * 28, "1E+27"],
)
def test_a_decimal_38_10_with_up_to_28_integer_digits_is_kept_exactly(text: str) -> None:
    # More digits than Python's default decimal context (28) holds.
    assert to_datum(text, DECIMAL_38_10) == Decimal(text)


@pytest.mark.parametrize("text", ["1" * 29, "1E+28", "-" + "9" * 29 + ".5"])
def test_a_decimal_with_more_integer_digits_than_precision_minus_scale_is_refused(
    text: str,
) -> None:
    with pytest.raises(InvalidRecord, match="at most 28 before the point") as refused:
        to_datum(text, DECIMAL_38_10, "$.amount")
    assert refused.value.path == "$.amount"


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "long", "logicalType": "timestamp-millis"}, 2**63),
        ({"type": "long", "logicalType": "timestamp-micros"}, -(2**63) - 1),
        ("long", 10**400),
        ("int", 2**31),
        ("int", -(2**31) - 1),
    ],
)
def test_integers_beyond_their_avro_range_are_refused_at_the_field(
    schema: object, value: int
) -> None:
    with pytest.raises(InvalidRecord, match="out of range") as refused:
        to_datum(value, schema, "$.n")
    assert refused.value.path == "$.n"
