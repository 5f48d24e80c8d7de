"""The gateway's promise through a broker outage: an acknowledged record is in Kafka, once.

A dedicated broker and API server (the session's broker must keep running for other tests).
Concurrent clients publish 200,000 records, never retrying, while the broker is stopped and
started again mid-run. Then the whole topic is read back and held against every answer.

With an idempotent producer, a record whose delivery report is an error (a delivery timeout)
may still have been written: the request reached the broker and the answer was lost. The
design promises that acknowledged records are in Kafka and that unacknowledged ones were
reported as failed, not the converse, so such records are counted and printed, not failed on.
"""

import io
import queue
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastavro
import httpx
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from hub_kafka.local_broker import LocalBroker
from hub_kafka.settings import KafkaSettings
from registry.wire import unframe
from tests.conftest import JARS
from tests.support.api_server import serve_api
from tests.support.hub_client import bearer, create_feed, create_key
from tests.support.ports import free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

TOTAL = 200_000
BATCH = 500
CLIENTS = 8
# Shorter than the outage, so that records waiting for the broker are answered as failed.
DELIVERY_TIMEOUT_MS = 5_000
STOP_AFTER = 50_000  # records answered before the broker is stopped
PAUSE_S = 6.0  # between the broker's stop and its start: longer than the delivery timeout
PUBLISH_DEADLINE_S = 150.0
# Well above the gateway's longest wait (delivery timeout + 5 s): a client timeout would make
# a record look failed that the gateway may still acknowledge.
REQUEST_TIMEOUT_S = 60.0
TEAM = "reliability"
TOPIC = "reliability.pings"
SCHEMA = {
    "type": "record",
    "name": "Ping",
    "namespace": "reliability",
    "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": "string"}],
}


@dataclass
class Ledger:
    """Every per-record answer the clients got, and when each request ran."""

    acked: dict[int, tuple[int, int]] = field(default_factory=dict)  # id -> (partition, offset)
    failed: dict[int, str] = field(default_factory=dict)  # id -> why
    answered_twice: list[int] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)  # answers that broke the API's contract
    requests: list[tuple[float, float, int, int]] = field(default_factory=list)  # t0, t1, ok, err
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def answered(self) -> int:
        return len(self.acked) + len(self.failed)

    def take(self, ids: range, started: float, response: httpx.Response | None, why: str) -> None:
        """File one request's answers: per record from a 200/207, else all failed with `why`."""
        outcome: dict[int, tuple[int, int] | str] = dict.fromkeys(ids, why)
        if response is not None:
            status, results = response.status_code, _results(response)
            if status in (200, 207) and (results is None or len(results) != len(ids)):
                self.malformed.append(f"HTTP {status}: {response.text[:300]}")
            elif status in (200, 207) and results is not None:
                for record_id, result in zip(ids, results, strict=True):
                    if "offset" in result:
                        outcome[record_id] = (result["partition"], result["offset"])
                    else:
                        outcome[record_id] = f"{result.get('error_code')} {result.get('message')}"
            elif results is not None and len(results) == len(ids):
                # The whole request failed; its records still say why.
                for record_id, result in zip(ids, results, strict=True):
                    outcome[record_id] = (
                        f"HTTP {status} {result.get('error_code')} {result.get('message')}"
                    )
        ok = sum(1 for o in outcome.values() if isinstance(o, tuple))
        with self.lock:
            self.requests.append((started, time.monotonic(), ok, len(ids) - ok))
            for record_id, answer in outcome.items():
                if record_id in self.acked or record_id in self.failed:
                    self.answered_twice.append(record_id)
                if isinstance(answer, tuple):
                    self.acked[record_id] = answer
                else:
                    self.failed[record_id] = answer


@dataclass
class Outage:
    stop_called: float = 0.0
    stopped: float = 0.0
    start_called: float = 0.0
    back: float = 0.0

    @property
    def down_s(self) -> float:
        return self.back - self.stop_called


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[LocalBroker]:
    """A broker of this test's own: it is stopped and started while the test runs."""
    settings = KafkaSettings(
        broker_home=tmp_path / "kafka",
        broker_jars_dir=JARS / "kafka",
        broker_port=free_port(),
        controller_port=free_port(),
    )
    local = LocalBroker(settings)
    local.start()
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture
def gateway(broker: LocalBroker, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The API on the dedicated broker, with a feed of three partitions: (base URL, team key)."""
    database = f"sqlite:///{tmp_path / 'hub.db'}"
    with serve_api(
        database_url=database,
        bootstrap_servers=broker.bootstrap_servers,
        delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
    ) as url:
        key = create_key(database, team=TEAM)
        create_feed(url, key, topic=TOPIC, schema=SCHEMA, owner=TEAM, partitions=3)
        yield url, key


def test_acknowledged_records_survive_a_broker_restart_exactly_once(
    broker: LocalBroker, gateway: tuple[str, str]
) -> None:
    url, key = gateway
    ledger, outage = Ledger(), Outage()
    batches: queue.Queue[int] = queue.Queue()
    for batch in range(TOTAL // BATCH):
        batches.put(batch)
    halt = threading.Event()
    began = time.monotonic()
    deadline = began + PUBLISH_DEADLINE_S
    clients = [
        threading.Thread(
            target=_client, args=(url, key, batches, ledger, halt, deadline), name=f"client-{n}"
        )
        for n in range(CLIENTS)
    ]
    progress = threading.Thread(
        target=_progress, args=(ledger, outage, halt, began), name="progress", daemon=True
    )
    for thread in [*clients, progress]:
        thread.start()
    try:
        wait_until(
            lambda: ledger.answered >= STOP_AFTER or not any(t.is_alive() for t in clients),
            timeout_s=PUBLISH_DEADLINE_S / 2,
            what=f"{STOP_AFTER} answered records before the outage",
            interval_s=0.1,
        )
        outage.stop_called = time.monotonic()
        assert broker.stop(), "the dedicated broker was not running"
        outage.stopped = time.monotonic()
        _say(began, f"broker stopped (stop took {outage.stopped - outage.stop_called:.1f} s)")
        time.sleep(PAUSE_S)
        outage.start_called = time.monotonic()
        broker.start(timeout_s=90)
        outage.back = time.monotonic()
        _say(began, f"broker back (start took {outage.back - outage.start_called:.1f} s)")
        for thread in clients:
            thread.join(timeout=max(0.0, deadline + REQUEST_TIMEOUT_S - time.monotonic()))
    finally:
        halt.set()
        for thread in clients:
            thread.join(timeout=REQUEST_TIMEOUT_S)
    publish_s = max(t1 for _t0, t1, _ok, _err in ledger.requests) - began
    assert not any(t.is_alive() for t in clients), "a client is still waiting for an answer"

    stored = _read_topic(broker.bootstrap_servers, TOPIC)
    _say(began, f"read {len(stored)} records back from {TOPIC}")
    positions: dict[int, list[tuple[int, int]]] = {}
    for record_id, partition, offset in stored:
        positions.setdefault(record_id, []).append((partition, offset))

    duplicates = {i: p for i, p in positions.items() if len(p) > 1}
    unknown = sorted(i for i in positions if not 0 <= i < TOTAL)
    missing = sorted(i for i in ledger.acked if i not in positions)
    misplaced = sorted(
        i for i, at in ledger.acked.items() if i in positions and positions[i] != [at]
    )
    present_but_failed = sorted(i for i in ledger.failed if i in positions)
    unanswered = TOTAL - ledger.answered
    reasons = Counter(_reason(why) for why in ledger.failed.values())
    acked_after_restart = sum(ok for t0, _t1, ok, _err in ledger.requests if t0 >= outage.back)
    failing = [(t0, t1) for t0, t1, _ok, err in ledger.requests if err]
    error_window = "none"
    if failing:
        first, last = min(t0 for t0, _ in failing), max(t1 for _, t1 in failing)
        error_window = f"{first - began:.1f} s to {last - began:.1f} s"
    before = [r for r in ledger.requests if r[1] < outage.stop_called]
    rate_before = sum(r[2] for r in before) / max(1e-9, outage.stop_called - began)

    print(
        "\n".join(
            [
                "",
                f"published {TOTAL} records from {CLIENTS} clients in batches of {BATCH}: "
                f"{publish_s:.1f} s, {ledger.answered / publish_s:.0f} records/s overall, "
                f"{rate_before:.0f} records/s before the outage",
                f"broker down {outage.down_s:.1f} s (from {outage.stop_called - began:.1f} s "
                f"to {outage.back - began:.1f} s: stop {outage.stopped - outage.stop_called:.1f}"
                f" s, pause {PAUSE_S:.1f} s, start {outage.back - outage.start_called:.1f} s); "
                f"delivery timeout {DELIVERY_TIMEOUT_MS / 1000:.0f} s; "
                f"requests with errors from {error_window}",
                f"answers: {len(ledger.acked)} acknowledged, {len(ledger.failed)} failed, "
                f"{unanswered} unanswered, {len(ledger.answered_twice)} answered twice, "
                f"{len(ledger.malformed)} malformed answers; "
                f"{acked_after_restart} acknowledged in requests sent after the restart",
                f"failure reasons: {dict(reasons)}",
                f"topic: {len(stored)} records, {len(positions)} distinct ids; "
                f"acknowledged but missing {len(missing)}, at another position "
                f"{len(misplaced)}, duplicated {len(duplicates)}, unknown {len(unknown)}, "
                f"answered as failed but present {len(present_but_failed)}",
            ]
        ),
        flush=True,
    )
    if present_but_failed:
        print(
            f"FINDING: {len(present_but_failed)} records were answered as failed but are in "
            "the topic (a client that retries them publishes them twice):",
            flush=True,
        )
        for record_id in present_but_failed[:200]:
            print(f"  id {record_id} at {positions[record_id]}: {ledger.failed[record_id]}")
        if len(present_but_failed) > 200:
            print(f"  ... and {len(present_but_failed) - 200} more", flush=True)

    assert not ledger.malformed, ledger.malformed[:5]
    assert not ledger.answered_twice, ledger.answered_twice[:20]
    assert unanswered == 0, f"{unanswered} records got no answer at all"
    assert not missing, f"acknowledged but not in Kafka: {missing[:20]}"
    assert not misplaced, [(i, ledger.acked[i], positions[i]) for i in misplaced[:20]]
    assert not duplicates, dict(list(duplicates.items())[:20])
    assert not unknown, unknown[:20]
    # The run did what it is meant to: the outage produced failures, and the gateway recovered
    # by itself (same process, same producer) once the broker was back.
    assert ledger.failed, "no record failed: the outage was not exercised"
    assert acked_after_restart > 0, "nothing was acknowledged after the broker came back"


def _client(
    url: str,
    key: str,
    batches: "queue.Queue[int]",
    ledger: Ledger,
    halt: threading.Event,
    deadline: float,
) -> None:
    """Publish batches until none is left; no retries, so every record is answered once."""
    path = f"/v1/feeds/{TOPIC}/records"
    with httpx.Client(base_url=url, headers=bearer(key), timeout=REQUEST_TIMEOUT_S) as http:
        while not halt.is_set() and time.monotonic() < deadline:
            try:
                batch = batches.get_nowait()
            except queue.Empty:
                return
            ids = range(batch * BATCH, (batch + 1) * BATCH)
            body = {"records": [{"value": {"id": i, "note": f"b{batch}"}} for i in ids]}
            started = time.monotonic()
            try:
                response = http.post(path, json=body)
            except httpx.HTTPError as exc:
                ledger.take(ids, started, None, f"request failed: {type(exc).__name__}: {exc}")
            else:
                why = f"HTTP {response.status_code} {response.text[:200]}"
                ledger.take(ids, started, response, why)


def _results(response: httpx.Response) -> list[dict[str, Any]] | None:
    try:
        results = response.json().get("results")
    except (ValueError, AttributeError):
        return None
    return results if isinstance(results, list) else None


def _progress(ledger: Ledger, outage: Outage, halt: threading.Event, began: float) -> None:
    last_count, last_time = 0, began
    while not halt.wait(5.0):
        now = time.monotonic()
        count = ledger.answered
        if outage.stop_called == 0.0:
            broker = "up"
        elif outage.back == 0.0:
            broker = "DOWN"
        else:
            broker = "up again"
        _say(
            began,
            f"answered {count}/{TOTAL} (acked {len(ledger.acked)}, failed {len(ledger.failed)})"
            f", {(count - last_count) / (now - last_time):.0f} records/s, broker {broker}",
        )
        last_count, last_time = count, now
        if count >= TOTAL:
            return


def _say(began: float, text: str) -> None:
    print(f"[{time.monotonic() - began:6.1f} s] {text}", flush=True)


def _reason(why: str) -> str:
    """A failure message without its details, to count failures by kind."""
    return why.split(":", 1)[0] if "Kafka did not acknowledge" not in why else why[:120]


def _read_topic(
    bootstrap: str, topic: str, *, timeout_s: float = 60.0
) -> list[tuple[int, int, int]]:
    """(id, partition, offset) of every committed record of `topic`, read to its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reliability-{time.time_ns()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    parsed = fastavro.parse_schema(SCHEMA)
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in metadata.partitions
        }
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        records: list[tuple[int, int, int]] = []
        next_offset = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + timeout_s
        while any(next_offset[p] < ends[p] for p in ends):
            assert time.monotonic() < deadline, f"reading {topic} did not reach {ends}"
            for message in consumer.consume(num_messages=10_000, timeout=1.0):
                assert message.error() is None, message.error()
                raw, partition, offset = message.value(), message.partition(), message.offset()
                assert raw is not None and partition is not None and offset is not None
                _schema_id, payload = unframe(raw)
                value: Any = fastavro.schemaless_reader(io.BytesIO(payload), parsed, None)
                records.append((int(value["id"]), partition, offset))
                next_offset[partition] = offset + 1
        return records
    finally:
        consumer.close()
