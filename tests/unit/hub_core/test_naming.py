import pytest

from connectors.settings import ConnectSettings
from hub_core.errors import ErrorCode, TerminalError
from hub_core.naming import (
    ReservedTopicName,
    bronze_table,
    dlq_topic,
    feed_topic_name,
    reserved_topic_rule,
    topic_name,
    value_subject,
)

pytestmark = pytest.mark.unit


def test_topic_tables_and_subjects_follow_the_naming_contract() -> None:
    topic = topic_name("sales.orders")
    assert bronze_table(topic) == "bronze.sales_orders"
    assert value_subject(topic) == "sales.orders-value"


@pytest.mark.parametrize("bad", ["orders", "Sales.orders", "sales..orders", "sales.orders!", ".x"])
def test_names_outside_the_domain_dot_name_form_are_refused(bad: str) -> None:
    with pytest.raises(TerminalError, match="Invalid topic name"):
        topic_name(bad)


@pytest.mark.parametrize(
    ("reserved", "rule"),
    [
        ("sales.orders.dlq", "dead-letter"),
        ("x.y.dlq", "dead-letter"),
        ("_hub_connect_offsets", "hub's state"),
        ("sales._hub_state", "hub's state"),
        ("__consumer_offsets", "internal"),
        ("_schemas", "internal"),
        ("sales._private", "internal"),
    ],
)
def test_reserved_topics_cannot_be_feeds_and_the_refusal_names_the_rule(
    reserved: str, rule: str
) -> None:
    with pytest.raises(ReservedTopicName, match=rule) as refused:
        feed_topic_name(reserved)
    assert refused.value.code is ErrorCode.RESERVED_TOPIC_NAME
    assert refused.value.code.http_status == 422


def test_every_dead_letter_topic_the_hub_makes_is_reserved() -> None:
    assert reserved_topic_rule(dlq_topic(topic_name("sales.orders"))) is not None


def test_the_connect_state_topics_are_reserved() -> None:
    fields = ConnectSettings.model_fields
    for name in ("offsets_topic", "configs_topic", "status_topic"):
        topic = fields[name].default
        assert reserved_topic_rule(topic) is not None, topic


@pytest.mark.parametrize("free", ["sales.orders", "sales.dlq_archive", "dlq.orders", "a.b_c"])
def test_names_that_only_resemble_reserved_ones_are_free(free: str) -> None:
    assert reserved_topic_rule(free) is None
    assert feed_topic_name(free) == free
