"""Publishing through the gateway from several threads while brokers fail, and checking the
answers against what the topic holds (used by tests/e2e/test_broker_failover.py and
bench/failover.py)."""

import io
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import fastavro
import httpx
from confluent_kafka.admin import AdminClient

from tests.support.hub_client import bearer
from tests.support.kafka import read_all

SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Tick",
    "fields": [{"name": "id", "type": "long"}, {"name": "writer", "type": "int"}],
}
_PARSED = fastavro.parse_schema(SCHEMA)


@dataclass(slots=True)
class Answers:
    """What the gateway answered, record by record: where each published record went, the
    error code of each refused one, and each request's status and latency."""

    # id -> (partition, offset); the offset is None when the producer learned that Kafka stored
    # the record but not where (docs/publishing.md, "The answer")
    stored: dict[int, tuple[int, int | None]] = field(default_factory=dict)
    refused: dict[int, int] = field(default_factory=dict)  # id -> error code
    uncoded: list[str] = field(default_factory=list)  # answers without a code: must stay empty
    # ids of requests that got no answer at all (the connection failed or timed out)
    unanswered: list[int] = field(default_factory=list)
    # (started, seconds, records) of each request, `started` from time.monotonic()
    latencies: list[tuple[float, float, int]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def answered(self) -> int:
        """Records whose request is over: answered, or given up without an answer."""
        with self.lock:
            return len(self.stored) + len(self.refused) + len(self.unanswered)

    def no_answer(self, ids: list[int], error: httpx.HTTPError, started: float) -> None:
        """A request that raised instead of answering: its records' fate is unknown."""
        with self.lock:
            self.latencies.append((started, time.monotonic() - started, len(ids)))
            self.unanswered.extend(ids)
            self.uncoded.append(f"no answer after {time.monotonic() - started:.0f} s: {error!r}")

    def record(self, ids: list[int], response: httpx.Response, started: float) -> None:
        with self.lock:
            self.latencies.append((started, time.monotonic() - started, len(ids)))
            try:
                body = response.json() if response.content else {}
            except ValueError:  # not JSON: reported below as an answer without a code
                body = {}
            results = body.get("results") if isinstance(body, dict) else None
            if response.status_code in (200, 207) and results is not None:
                for record_id, result in zip(ids, results, strict=True):
                    self._one(record_id, result, response.status_code)
            elif isinstance(body, dict) and isinstance(body.get("error_code"), int):
                code: int = body["error_code"]
                self.refused.update(dict.fromkeys(ids, code))
            else:
                self.uncoded.append(f"{response.status_code}: {response.text[:300]}")

    def _one(self, record_id: int, result: dict[str, Any], status: int) -> None:
        if "offset" in result and result.get("error_code") is None:
            self.stored[record_id] = (result["partition"], result["offset"])
        elif isinstance(result.get("error_code"), int):
            self.refused[record_id] = result["error_code"]
        else:
            self.uncoded.append(f"{status}: {result}")


def publish_concurrently(
    api_url: str, key: str, topic: str, *, writers: int, records: int, batch: int, answers: Answers,
    pause: Callable[[], None] = lambda: None,
) -> list[threading.Thread]:  # fmt: skip
    """Start `writers` threads that publish `records` records in all (ids 0 to records-1, each
    thread its own share) in requests of `batch`; the caller joins the threads. `pause` runs
    before each request (a benchmark holds the writers there while a broker restarts)."""

    def write(writer: int) -> None:
        ids = list(range(writer, records, writers))
        with httpx.Client(headers=bearer(key), timeout=120) as client:
            for start in range(0, len(ids), batch):
                chunk = ids[start : start + batch]
                body = {"records": [{"value": {"id": i, "writer": writer}} for i in chunk]}
                pause()
                started = time.monotonic()
                try:
                    response = client.post(f"{api_url}/v1/feeds/{topic}/records", json=body)
                except httpx.HTTPError as error:
                    # The test then fails on `uncoded`, naming the error, instead of waiting
                    # for answers a dead writer thread would never record.
                    answers.no_answer(chunk, error, started)
                    continue
                answers.record(chunk, response, started)

    threads = [
        threading.Thread(target=write, args=(w,), name=f"writer-{w}") for w in range(writers)
    ]
    for thread in threads:
        thread.start()
    return threads


def leader_of(bootstrap: str, topic: str, partition: int = 0) -> int:
    """The node id that leads `partition` of `topic` now."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return int(metadata.topics[topic].partitions[partition].leader)


def topic_ids(bootstrap: str, topic: str, *, expected: int) -> dict[tuple[int, int], int]:
    """Record id at each (partition, offset) of `topic`, read from its beginning."""
    messages = read_all(bootstrap, topic, expected=expected, timeout_s=120)
    return {(m.partition() or 0, m.offset() or 0): _record_id(m.value() or b"") for m in messages}


def misplaced(
    answers: Answers, positions: dict[tuple[int, int], int]
) -> dict[int, tuple[int, int | None]]:
    """Acknowledged records the topic does not hold where their answer said: at their offset,
    or, for an answer without one, anywhere in their partition."""
    in_partition = {(partition, record_id) for (partition, _), record_id in positions.items()}
    return {
        record_id: (partition, offset)
        for record_id, (partition, offset) in answers.stored.items()
        if (
            positions.get((partition, offset)) != record_id
            if offset is not None
            else (partition, record_id) not in in_partition
        )
    }


def duplicates(positions: dict[tuple[int, int], int]) -> list[int]:
    """Ids that the topic holds more than once."""
    return [i for i, n in Counter(positions.values()).items() if n > 1]


def _record_id(framed: bytes) -> int:
    """The `id` of a Confluent-framed Avro record (magic byte, 4-byte schema id, datum)."""
    value: Any = fastavro.schemaless_reader(io.BytesIO(framed[5:]), _PARSED, None)
    return int(value["id"])
