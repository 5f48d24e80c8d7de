"""Topic and table naming, as fixed by the design: `<domain>.<name>` topics.

Some names belong to the hub or to Kafka itself and no feed may claim them
(`reserved_topic_rule`): a feed that could take `sales.orders.dlq` could delete another feed's
dead letters, and one on `_hub_connect_offsets` the connectors' positions.
"""

import re
from typing import NewType

from hub_core.errors import ErrorCode, TerminalError

TopicName = NewType("TopicName", str)

# Every character Kafka allows in a topic name is in `[a-zA-Z0-9._-]`; hub topics use a subset.
_TOPIC = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+")
# The last segment of every feed's dead-letter topic (`dlq_topic`).
DLQ_SEGMENT = "dlq"
# Kafka's longest topic name (`Topic.MAX_NAME_LENGTH` in its source).
KAFKA_MAX_TOPIC_LENGTH = 249
# A hub topic leaves room for the names derived from it. The longest is its dead-letter topic,
# `<topic>.dlq`; the others fit with it: subjects `<topic>-value` (251 of the registry's 255),
# tables `silver.<topic with dots as underscores>_history` (253 of a file name's 255 bytes).
MAX_TOPIC_LENGTH = KAFKA_MAX_TOPIC_LENGTH - len(f".{DLQ_SEGMENT}")


def topic_name(text: str) -> TopicName:
    """Validate a hub topic name: lowercase `<domain>.<name>` segments of letters, digits, `_`,
    at most `MAX_TOPIC_LENGTH` characters."""
    if len(text) > MAX_TOPIC_LENGTH:
        raise TerminalError(
            f"Invalid topic name '{text[:60]}...': it has {len(text):,} characters, and a hub "
            f"topic at most {MAX_TOPIC_LENGTH}, so that its dead-letter topic '<topic>.dlq' "
            f"fits Kafka's limit of {KAFKA_MAX_TOPIC_LENGTH}. Choose a shorter name."
        )
    if not _TOPIC.fullmatch(text):
        raise TerminalError(
            f"Invalid topic name {text!r}: hub topics are lowercase '<domain>.<name>' "
            "(letters, digits and underscores, dot-separated, e.g. 'sales.orders')."
        )
    return TopicName(text)


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
