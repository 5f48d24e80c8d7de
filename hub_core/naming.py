"""Topic and table naming, as fixed by the design: `<domain>.<name>` topics."""

import re
from typing import NewType

from hub_core.errors import TerminalError

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
