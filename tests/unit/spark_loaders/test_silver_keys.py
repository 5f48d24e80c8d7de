"""Key columns of envelope feeds without a key subject: the row record's non-nullable fields."""

import json

import pytest

from hub_cli import demo
from spark_loaders.silver.keys import required_row_fields

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("topic", "keys"), [("demo.customers", ("customer_id",)), ("demo.products", ("sku",))]
)
def test_the_demo_changelog_feeds_are_keyed_by_their_non_nullable_row_fields(
    topic: str, keys: tuple[str, ...]
) -> None:
    assert required_row_fields(json.loads(demo.schema_text(topic))) == keys


def test_a_value_without_an_envelope_has_no_key_columns() -> None:
    assert required_row_fields(json.loads(demo.schema_text("demo.orders"))) == ()
