"""Source positions of connectors, kept in a compacted Kafka topic.

A position is confirmed only after Kafka acknowledged every record before it, so a connector
that crashes replays from its last confirmed position and never skips. Keys follow Kafka
Connect's shape, `["<connector>", {<source partition>}]`, so one connector can keep a position
per table or per file.
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from connectors.state_topic import StateTopic

SourcePartition = Mapping[str, Any]
SourceOffset = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class StoredOffset:
    partition: dict[str, Any]
    offset: dict[str, Any]


def offset_key(connector: str, partition: SourcePartition) -> str:
    """The record key of one source partition's position."""
    return json.dumps([connector, dict(partition)], sort_keys=True, separators=(",", ":"))


class OffsetStore:
    """Load and commit the source positions of connectors."""

    def __init__(self, topic: StateTopic) -> None:
        self._topic = topic

    def load(self, connector: str) -> list[StoredOffset]:
        """Every stored position of `connector`, one per source partition."""
        found = []
        for key, value in self._topic.snapshot().items():
            name, partition = json.loads(key)
            if name == connector:
                found.append(StoredOffset(partition=partition, offset=value))
        return sorted(found, key=lambda s: json.dumps(s.partition, sort_keys=True))

    def commit(self, connector: str, partition: SourcePartition, offset: SourceOffset) -> None:
        """Store a position; returns once Kafka acknowledged it (raises KafkaUnavailable)."""
        self._topic.put(offset_key(connector, partition), dict(offset))
