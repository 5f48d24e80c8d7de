"""A stand-in for `hub_kafka.producer.FeedProducer` (and `TransactionalProducers`) in unit tests.

It implements the methods `Publisher` calls and answers in their shapes: `produce_encoded`,
`produce_encoded_async` and `send_encoded_async` report `(partition, offset)` for a stored record
and a `Delivery` for one that was not; `produce_many` and `produce_atomically` answer a
`Delivery` per record. Records are kept per topic, on partition 0, at the next offset.
Integration tests use a real broker instead.
"""

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from hub_kafka.producer import Delivery, EncodedRecord, OutgoingRecord, Report


class Sent(NamedTuple):
    """A record as Kafka would have stored it."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    timestamp_ms: int | None
    offset: int


class _Stored:
    """What `send_encoded_async` answers: reports already known, as `Sending` gives them."""

    def __init__(self, reports: list[Report]) -> None:
        self._reports = reports

    async def reports(self) -> list[Report]:
        return self._reports


class FakeProducer:
    """Stores what it is given; records to a topic in `failures` get that `Delivery` instead."""

    def __init__(self, *, failures: Mapping[str, Delivery] | None = None) -> None:
        self.failures: dict[str, Delivery] = dict(failures or {})
        self.sent: list[Sent] = []
        self.calls = 0

    def on(self, topic: str) -> list[Sent]:
        """The records stored in `topic`, in order."""
        return [s for s in self.sent if s.topic == topic]

    def produce_encoded(self, items: Sequence[EncodedRecord]) -> list[Report]:
        self.calls += 1
        reports: list[Report] = []
        for topic, key, value, headers, timestamp_ms in items:
            delivery = self._store(topic, key, value, headers or [], timestamp_ms)
            reports.append((delivery.partition, delivery.offset) if delivery.ok else delivery)
        return reports

    async def produce_encoded_async(self, items: Sequence[EncodedRecord]) -> list[Report]:
        return self.produce_encoded(items)

    async def send_encoded_async(self, items: Sequence[EncodedRecord]) -> "_Stored":
        return _Stored(self.produce_encoded(items))

    def produce_many(self, items: Sequence[tuple[str, OutgoingRecord]]) -> list[Delivery]:
        self.calls += 1
        return [
            self._store(topic, r.key, r.value, list(r.headers), r.timestamp_ms)
            for topic, r in items
        ]

    def produce_atomically(self, items: Sequence[tuple[str, OutgoingRecord]]) -> list[Delivery]:
        """As `TransactionalProducers.produce_atomically`: all stored, or none."""
        failed = next((self.failures[t] for t, _ in items if t in self.failures), None)
        if failed is not None:
            self.calls += 1
            return [failed for _ in items]
        return self.produce_many(items)

    def _store(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]],
        timestamp_ms: int | None,
    ) -> Delivery:
        failure = self.failures.get(topic)
        if failure is not None:
            return failure
        offset = len(self.on(topic))
        self.sent.append(Sent(topic, key, value, headers, timestamp_ms, offset))
        return Delivery(partition=0, offset=offset)
