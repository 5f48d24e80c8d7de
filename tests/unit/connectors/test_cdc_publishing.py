"""The CDC connector's publishing thread: order, positions only after emit, failures surface."""

import threading

import pytest

from connectors.errors import Stopped
from connectors.postgres.publishing import BatchPublisher
from connectors.runtime import Batch, SourceContext
from hub_kafka.errors import KafkaUnavailable


def _context(emit: object, stop: threading.Event | None = None) -> SourceContext:
    resumed = threading.Event()
    resumed.set()
    return SourceContext(
        "shop", offsets=[], emit=emit, stop=stop or threading.Event(), resumed=resumed
    )  # type: ignore[arg-type]


def _batch(lsn: int) -> Batch:
    return Batch(topic="cdc.shop.public.orders", partition={"slot": "s"}, offset={"lsn": lsn})


def test_batches_are_emitted_in_order_and_the_position_follows_only_emitted_ones() -> None:
    release = threading.Event()
    emitted: list[int] = []

    def emit(batch: Batch) -> None:
        release.wait(10)
        emitted.append(int(batch.offset["lsn"]))

    publisher = BatchPublisher(_context(emit), name="s", depth=3)
    try:
        for lsn in (10, 20, 30):
            publisher.submit(_batch(lsn))
        assert publisher.committed is None  # nothing is in Kafka yet: nothing to confirm
        release.set()
        publisher.drain()
        assert emitted == [10, 20, 30]
        assert publisher.committed == {"lsn": 30}
    finally:
        publisher.close()


def test_a_failed_emit_is_raised_to_the_reader_and_nothing_after_it_is_emitted() -> None:
    emitted: list[int] = []

    def emit(batch: Batch) -> None:
        if batch.offset["lsn"] == 20:
            raise KafkaUnavailable("broker gone")
        emitted.append(int(batch.offset["lsn"]))

    publisher = BatchPublisher(_context(emit), name="s", depth=1)
    try:
        publisher.submit(_batch(10))
        publisher.submit(_batch(20))
        with pytest.raises(KafkaUnavailable):
            publisher.drain()
        with pytest.raises(KafkaUnavailable):
            publisher.submit(_batch(30))
        assert emitted == [10]
    finally:
        publisher.close()


def test_a_stopped_task_stops_the_publisher_and_the_reader_hears_it() -> None:
    stop = threading.Event()
    stop.set()
    emitted: list[Batch] = []
    publisher = BatchPublisher(_context(emitted.append, stop), name="s")
    try:
        publisher.submit(_batch(10))
        with pytest.raises(Stopped):
            publisher.drain()
        with pytest.raises(Stopped):
            _ = publisher.committed
        assert emitted == []
    finally:
        publisher.close()
