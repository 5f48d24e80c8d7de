"""Topic and table naming, as fixed by the design: `<domain>.<name>` topics.

Some names belong to the hub or to Kafka itself and no feed may claim them
(`reserved_topic_rule`): a feed that could take `sales.orders.dlq` could delete another feed's
dead letters, and one on `_hub_connect_offsets` the connectors' positions.
"""

import re
from typing import NewType

from hub_core.errors import ErrorCode, TerminalError

TopicName = NewType("TopicName", str)

_TOPIC = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")


def topic_name(text: str) -> TopicName:
    """Validate a hub topic name: lowercase `<domain>.<name>` segments of letters, digits, `_`."""
    if len(text) > 249 or not _TOPIC.match(text):
        raise TerminalError(
            f"Invalid topic name '{text}': hub topics are lowercase '<domain>.<name>' "
            "(letters, digits and underscores, dot-separated, e.g. 'sales.orders')."
        )
    return TopicName(text)


# The last segment of every feed's dead-letter topic (`dlq_topic`).
DLQ_SEGMENT = "dlq"
# Topics of the hub's own state (`_hub_connect_offsets`, ...) start with this.
HUB_TOPIC_PREFIX = "_hub_"
# Kafka's and its tools' internal topics (`__consumer_offsets`, `_schemas`) start with `_`.
INTERNAL_TOPIC_PREFIX = "_"


class ReservedTopicName(TerminalError):
    """A name the hub or Kafka keeps for itself; the message names the rule."""

    code = ErrorCode.RESERVED_TOPIC_NAME


def reserved_topic_rule(text: str) -> str | None:
    """The rule that reserves `text` for the hub or Kafka, or None when a feed may use it."""
    segments = text.split(".")
    if segments[-1] == DLQ_SEGMENT:
        return (
            f"topics whose last segment is '{DLQ_SEGMENT}' are dead-letter topics, created "
            "and deleted with their feed"
        )
    for segment in segments:
        if segment.startswith(HUB_TOPIC_PREFIX):
            return f"topics with a segment starting with '{HUB_TOPIC_PREFIX}' hold the hub's state"
        if segment.startswith(INTERNAL_TOPIC_PREFIX):
            return (
                f"topics with a segment starting with '{INTERNAL_TOPIC_PREFIX}' are internal "
                "to Kafka and its tools"
            )
    return None


def feed_topic_name(text: str) -> TopicName:
    """A topic a feed may own: not reserved (`reserved_topic_rule`), then a valid `topic_name`."""
    rule = reserved_topic_rule(text)
    if rule is not None:
        raise ReservedTopicName(
            f"Topic '{text}' is reserved: {rule}. Choose another '<domain>.<name>' topic."
        )
    return topic_name(text)


def table_suffix(topic: TopicName) -> str:
    """The table name part for a topic: its dots as underscores."""
    return topic.replace(".", "_")


def bronze_table(topic: TopicName) -> str:
    """The bronze Delta table a topic lands in, e.g. `bronze.sales_orders`."""
    return f"bronze.{table_suffix(topic)}"


def value_subject(topic: TopicName) -> str:
    """The registry subject of a topic's value schema (topic-name strategy)."""
    return f"{topic}-value"


def key_subject(topic: TopicName) -> str:
    """The registry subject of a topic's key schema (topic-name strategy)."""
    return f"{topic}-key"


def dlq_topic(topic: TopicName) -> TopicName:
    """The dead-letter topic of a feed: records that failed validation, with the reason."""
    return TopicName(f"{topic}.dlq")
