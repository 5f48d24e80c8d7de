"""Warehouse model files: what validates, and the errors naming file, key path and choices."""

from pathlib import Path
from typing import Any

import pytest

from hub_core.errors import ErrorCode
from spark_loaders.warehouse.errors import InvalidWarehouseModel
from spark_loaders.warehouse.model import ScdType, load_model, parse_model

pytestmark = pytest.mark.unit

DEMO = Path(__file__).resolve().parents[3] / "hub_cli" / "demo" / "warehouse.yaml"


def _model() -> dict[str, Any]:
    return {
        "dimensions": [
            {
                "name": "customer",
                "source": "shop.customers",
                "business_key": ["customer_id"],
                "attributes": ["name", "country"],
                "scd_type": 2,
            }
        ],
        "facts": [
            {
                "name": "orders",
                "source": "shop.orders",
                "grain": ["order_id"],
                "event_time": "ordered_at",
                "measures": ["amount"],
                "dimensions": [
                    {"dimension": "customer", "columns": {"customer_id": "customer_id"}}
                ],
            }
        ],
    }


def _error(data: dict[str, Any]) -> str:
    with pytest.raises(InvalidWarehouseModel) as caught:
        parse_model(data, source="model.yaml")
    assert caught.value.code is ErrorCode.INVALID_WAREHOUSE_MODEL
    assert caught.value.code.http_status == 422
    return caught.value.message


def test_the_demo_model_validates() -> None:
    model = load_model(DEMO)
    assert [d.name for d in model.dimensions] == ["customer", "product"]
    assert model.dimension("customer").scd_type is ScdType.VERSIONED
    assert model.dimension("product").scd_type is ScdType.OVERWRITE
    assert [f.name for f in model.facts] == ["orders"]


def test_an_unknown_key_is_named_with_its_path() -> None:
    data = _model()
    data["dimensions"][0]["scd"] = 2
    message = _error(data)
    assert message.startswith("model.yaml: ")
    assert "dimensions[0].scd: unknown key" in message


def test_a_bad_scd_type_lists_the_valid_choices() -> None:
    data = _model()
    data["dimensions"][0]["scd_type"] = 3
    message = _error(data)
    assert "dimensions[0].scd_type: 3 is invalid" in message
    assert "1 or 2" in message


def test_a_reference_to_an_undeclared_dimension_lists_the_declared_ones() -> None:
    data = _model()
    data["facts"][0]["dimensions"][0]["dimension"] = "client"
    message = _error(data)
    assert "facts[0].dimensions[0].dimension: 'client' is not a dimension of this model" in message
    assert "valid choices: customer" in message


def test_reference_columns_must_cover_the_business_key() -> None:
    data = _model()
    data["facts"][0]["dimensions"][0]["columns"] = {"customer_id": "id"}
    message = _error(data)
    assert "facts[0].dimensions[0].columns" in message
    assert "valid choices: customer_id" in message


def test_missing_keys_and_bad_names_are_reported_together() -> None:
    data = _model()
    del data["facts"][0]["grain"]
    data["dimensions"][0]["name"] = "Customer"
    data["dimensions"][0]["source"] = "customers"
    message = _error(data)
    assert "facts[0].grain: required key missing" in message
    assert "dimensions[0].name: 'Customer' is invalid" in message
    assert "dimensions[0].source: 'customers' is invalid" in message


def test_duplicate_names_and_key_attributes_are_refused() -> None:
    data = _model()
    data["dimensions"].append(dict(data["dimensions"][0]))
    data["dimensions"][0]["attributes"] = ["customer_id", "name"]
    message = _error(data)
    assert "dimensions[1].name: 'customer' is used twice" in message
    assert "dimensions[0].attributes: ['customer_id'] are business key columns" in message


def test_a_file_that_is_not_a_mapping_or_not_yaml_is_named(tmp_path: Path) -> None:
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(InvalidWarehouseModel, match=r"list\.yaml: a model is a mapping"):
        load_model(listed)
    broken = tmp_path / "broken.yaml"
    broken.write_text("dimensions: [\n")
    with pytest.raises(InvalidWarehouseModel, match=r"broken\.yaml: not valid YAML"):
        load_model(broken)
    with pytest.raises(InvalidWarehouseModel, match=r"missing\.yaml: cannot read"):
        load_model(tmp_path / "missing.yaml")
