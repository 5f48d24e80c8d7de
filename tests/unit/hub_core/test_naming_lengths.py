"""Every name the hub derives from a topic fits where it goes: Kafka, the registry, the tables."""

import re

import pytest

from hub_core.errors import ErrorCode, TerminalError
from hub_core.naming import (
    KAFKA_MAX_TOPIC_LENGTH,
    MAX_TOPIC_LENGTH,
    bronze_table,
    dlq_topic,
    key_subject,
    table_suffix,
    topic_name,
    value_subject,
)
from registry.limits import MAX_SUBJECT_LENGTH

pytestmark = pytest.mark.unit

# Kafka's legal topic characters (`Topic.validate` in its source).
KAFKA_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
# The longest file name (a table's folder) on the file systems the tables live on.
NAME_MAX = 255


def test_every_name_derived_from_the_longest_topic_fits_kafka_the_registry_and_the_tables() -> None:
    topic = topic_name("sales." + "o" * (MAX_TOPIC_LENGTH - len("sales.")))

    dlq = dlq_topic(topic)
    assert len(dlq) <= KAFKA_MAX_TOPIC_LENGTH and KAFKA_TOPIC.fullmatch(dlq)
    assert KAFKA_TOPIC.fullmatch(topic)
    assert max(len(value_subject(topic)), len(key_subject(topic))) <= MAX_SUBJECT_LENGTH
    suffix = table_suffix(topic)
    for table in (f"{suffix}_current", f"{suffix}_history", bronze_table(topic).split(".")[1]):
        assert len(table.encode()) <= NAME_MAX, table


def test_a_topic_one_character_longer_is_refused_naming_the_limit_and_why() -> None:
    with pytest.raises(TerminalError) as refused:
        topic_name("sales." + "o" * (MAX_TOPIC_LENGTH + 1 - len("sales.")))

    assert refused.value.code is ErrorCode.MALFORMED_REQUEST
    assert f"at most {MAX_TOPIC_LENGTH}" in refused.value.message
    assert "'<topic>.dlq'" in refused.value.message


def test_a_huge_topic_is_refused_without_repeating_it_in_the_message() -> None:
    with pytest.raises(TerminalError) as refused:
        topic_name("sales." + "o" * 5_000_000)

    assert len(refused.value.message) < 500


@pytest.mark.parametrize("tail", ["\n", "\r", "\t", " ", "-", "\u00e9", "\x00"])
def test_a_topic_with_a_character_outside_hub_names_is_refused_wherever_it_is(tail: str) -> None:
    for text in (f"sales.orders{tail}", f"sales.or{tail}ders", f"{tail}sales.orders"):
        with pytest.raises(TerminalError, match="Invalid topic name"):
            topic_name(text)
