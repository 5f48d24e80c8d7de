import pytest

from hub_core.errors import TerminalError
from hub_core.naming import bronze_table, topic_name, value_subject

pytestmark = pytest.mark.unit


def test_topic_tables_and_subjects_follow_the_naming_contract() -> None:
    topic = topic_name("sales.orders")
    assert bronze_table(topic) == "bronze.sales_orders"
    assert value_subject(topic) == "sales.orders-value"


@pytest.mark.parametrize("bad", ["orders", "Sales.orders", "sales..orders", "sales.orders!", ".x"])
def test_names_outside_the_domain_dot_name_form_are_refused(bad: str) -> None:
    with pytest.raises(TerminalError, match="Invalid topic name"):
        topic_name(bad)
