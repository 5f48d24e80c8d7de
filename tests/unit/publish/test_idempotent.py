"""Idempotent publish requests: a retry with the same key is answered again, never published twice.

`IdempotentRequests` over the catalog's real `IdempotencyStore` (SQLite); each attempt publishes
through `Publisher` to a fake producer, and answers as the gateway does: 200 when Kafka took
every record, the first failure's status otherwise.
"""

import asyncio
import json

import pytest
from sqlalchemy import Engine

from catalog.errors import IdempotencyKeyReused
from catalog.idempotency import IdempotencyStore
from catalog.types import Feed
from hub_core.errors import ErrorCode
from hub_kafka.producer import Delivery
from publish.idempotent import Answer, Attempt, IdempotentRequests
from publish.publisher import IncomingRecord, Publisher
from tests.unit.publish.fake_producer import FakeProducer

pytestmark = pytest.mark.unit

SCOPE = "plant.readings|key-1"
RECORDS = [IncomingRecord(value={"id": n, "sensor": "s", "celsius": 1.0}) for n in range(3)]


class Requests:
    """Publish requests for `RECORDS`, counting how often one actually ran."""

    def __init__(self, publisher: Publisher, feed: Feed, requests: IdempotentRequests) -> None:
        self.runs = 0
        self._publisher = publisher
        self._feed = feed
        self._requests = requests

    async def _attempt(self, records: list[IncomingRecord]) -> Attempt:
        self.runs += 1
        outcome = await self._publisher.publish_async(self._publisher.codecs(self._feed), records)
        failed = [r.error_code for r in outcome.results if r.error_code is not None]
        status = failed[0].http_status if failed else 200
        body = json.dumps([[r.offset, r.error_code] for r in outcome.results]).encode()
        return Attempt(Answer(status, body), reached_kafka=outcome.accepted > 0)

    def send(
        self,
        *,
        key: str | None,
        request: bytes = b"the body",
        records: list[IncomingRecord] = RECORDS,
        scope: str = SCOPE,
    ) -> Answer:
        return asyncio.run(
            self._requests.answer(
                scope=scope, key=key, request=request, attempt=lambda: self._attempt(records)
            )
        )


@pytest.fixture
def requests(hub_engine: Engine, publisher: Publisher, readings: Feed) -> Requests:
    return Requests(publisher, readings, IdempotentRequests(IdempotencyStore(hub_engine)))


def test_a_retry_with_the_same_key_gets_the_stored_answer_and_publishes_nothing(
    requests: Requests, producer: FakeProducer
) -> None:
    first = requests.send(key="retry-me")
    again = requests.send(key="retry-me")

    assert (first.status_code, first.replayed) == (200, False)
    assert (again.status_code, again.body, again.replayed) == (200, first.body, True)
    assert requests.runs == 1
    assert len(producer.on("plant.readings")) == len(RECORDS)


def test_the_same_key_with_a_different_request_is_refused(
    requests: Requests, producer: FakeProducer
) -> None:
    requests.send(key="used-once")

    with pytest.raises(IdempotencyKeyReused) as refused:
        requests.send(key="used-once", request=b"another body")

    assert refused.value.code is ErrorCode.IDEMPOTENCY_KEY_REUSED
    assert int(refused.value.code) == 42223
    assert "used-once" in refused.value.message
    assert requests.runs == 1
    assert len(producer.on("plant.readings")) == len(RECORDS)


def test_a_server_error_with_nothing_in_kafka_releases_the_key_for_a_retry(
    requests: Requests, producer: FakeProducer
) -> None:
    producer.failures["plant.readings"] = Delivery(error="Broker: timed out", retriable=True)
    failed = requests.send(key="after-outage")
    producer.failures.clear()
    retried = requests.send(key="after-outage")

    assert failed.status_code == 503
    assert (retried.status_code, retried.replayed) == (200, False)
    assert requests.runs == 2
    assert len(producer.on("plant.readings")) == len(RECORDS)


def test_an_answer_after_some_records_reached_kafka_is_kept_even_when_it_is_an_error(
    requests: Requests, producer: FakeProducer
) -> None:
    # A record that fails validation makes the answer 4xx; the valid ones are in Kafka.
    records = [*RECORDS[:2], IncomingRecord(value={"id": "x", "sensor": "s", "celsius": 1.0})]
    first = requests.send(key="partly", records=records)
    again = requests.send(key="partly", records=records)

    assert first.status_code == 422
    assert (again.status_code, again.body, again.replayed) == (422, first.body, True)
    assert requests.runs == 1
    assert len(producer.on("plant.readings")) == 2


def test_the_same_key_in_another_scope_is_another_request(requests: Requests) -> None:
    requests.send(key="shared", scope="plant.readings|key-1")
    other = requests.send(key="shared", scope="plant.readings|key-2")

    assert not other.replayed
    assert requests.runs == 2


def test_a_request_without_a_key_runs_every_time(
    requests: Requests, producer: FakeProducer
) -> None:
    requests.send(key=None)
    again = requests.send(key=None)

    assert not again.replayed
    assert requests.runs == 2
    assert len(producer.on("plant.readings")) == 2 * len(RECORDS)


def test_an_attempt_that_raises_releases_the_key(hub_engine: Engine) -> None:
    requests = IdempotentRequests(IdempotencyStore(hub_engine))
    runs = 0

    async def broken() -> Attempt:
        nonlocal runs
        runs += 1
        raise RuntimeError("the process is shutting down")

    async def working() -> Attempt:
        nonlocal runs
        runs += 1
        return Attempt(Answer(200, b"{}"), reached_kafka=True)

    with pytest.raises(RuntimeError):
        asyncio.run(requests.answer(scope=SCOPE, key="k", request=b"r", attempt=broken))
    answer = asyncio.run(requests.answer(scope=SCOPE, key="k", request=b"r", attempt=working))

    assert (answer.status_code, answer.replayed, runs) == (200, False, 2)
