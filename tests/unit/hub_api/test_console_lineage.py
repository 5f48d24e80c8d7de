"""The console's Lineage page reads its two forms, and the links to it, as the questions meant."""

from typing import Any, cast

import pytest

from catalog.errors import InvalidLineageQuery
from catalog.types import Principal
from hub_api.console.lineage_page import LineageForm, trace

pytestmark = pytest.mark.unit


class _Asked:
    """Records what the page asked the lineage service."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def row(self, caller: Principal, **asked: Any) -> Any:
        self.calls.append(("row", asked))
        raise InvalidLineageQuery("stop here")

    def row_by_key(self, caller: Principal, **asked: Any) -> Any:
        self.calls.append(("row_by_key", asked))
        raise InvalidLineageQuery("stop here")

    def positions(self, caller: Principal, **asked: Any) -> Any:
        self.calls.append(("positions", asked))
        raise InvalidLineageQuery("stop here")


@pytest.mark.parametrize(
    ("params", "call"),
    [
        ({"topic": "sales.orders", "partition": "0", "offset": "7"},  # a feed page's link
         ("positions", {"lsn": None, "request_id": None, "topic": "sales.orders",
                        "partition": 0, "offset": 7})),
        ({"find": "position", "lsn": "120", "topic": "", "partition": "", "offset": ""},
         ("positions", {"lsn": 120, "request_id": None, "topic": None, "partition": None,
                        "offset": None})),
        ({"find": "row", "table": "bronze.sales_orders", "partition": "1", "offset": "2",
          "key": ""}, ("row", {"table": "bronze.sales_orders", "partition": 1, "offset": 2})),
        ({"find": "row", "table": "silver.x_current", "key": "id=4", "partition": "",
          "offset": ""}, ("row_by_key", {"table": "silver.x_current", "key": "id=4"})),
    ],
)  # fmt: skip
def test_each_form_and_link_asks_the_service_its_question(
    params: dict[str, str], call: tuple[str, dict[str, Any]]
) -> None:
    asked = _Asked()

    with pytest.raises(InvalidLineageQuery):
        trace(cast(Any, asked), cast(Any, None), cast(Any, None), LineageForm.of(params))

    assert asked.calls == [call]


@pytest.mark.parametrize(
    "params",
    [
        {"find": "row", "table": "bronze.x", "partition": "0", "offset": "x1"},
        {"find": "row", "table": "bronze.x", "partition": "0", "offset": ""},
        {"find": "row", "table": "silver.x_current", "partition": "0", "key": "id=1"},
        {"find": "position", "lsn": "-5"},
        {"find": "position", "lsn": "\u00b2"},  # a digit to Python, no number to int()
    ],
)
def test_a_question_that_is_not_one_is_42280_before_the_service_is_asked(
    params: dict[str, str],
) -> None:
    asked = _Asked()

    with pytest.raises(InvalidLineageQuery):
        trace(cast(Any, asked), cast(Any, None), cast(Any, None), LineageForm.of(params))

    assert asked.calls == []


def test_no_question_shows_the_forms_only() -> None:
    assert trace(cast(Any, _Asked()), cast(Any, None), cast(Any, None), LineageForm.of({})) is None
