"""The source context: positions by partition, and emit/sleep that honour pause and stop."""

import threading

import pytest

from connectors.errors import Stopped
from connectors.offsets import StoredOffset, offset_key
from connectors.runtime import Batch, SourceContext

pytestmark = pytest.mark.unit


def _context(
    emitted: list[Batch], stop: threading.Event, resumed: threading.Event
) -> SourceContext:
    return SourceContext(
        "orders",
        offsets=[StoredOffset(partition={"table": "orders"}, offset={"id": 7})],
        emit=emitted.append,
        stop=stop,
        resumed=resumed,
    )


def test_positions_are_found_by_partition_and_follow_emitted_batches() -> None:
    emitted: list[Batch] = []
    resumed = threading.Event()
    resumed.set()
    context = _context(emitted, threading.Event(), resumed)
    assert context.offset({"table": "orders"}) == {"id": 7}
    assert context.offset({"table": "lines"}) is None
    context.emit(Batch("erp.orders", {"table": "orders"}, {"id": 9}))
    assert context.offset({"table": "orders"}) == {"id": 9}
    assert [b.offset for b in emitted] == [{"id": 9}]


def test_emit_waits_while_paused_and_a_stop_ends_the_wait() -> None:
    emitted: list[Batch] = []
    stop, resumed = threading.Event(), threading.Event()
    context = _context(emitted, stop, resumed)
    outcome: list[str] = []

    def emit() -> None:
        try:
            context.emit(Batch("erp.orders", {"table": "orders"}, {"id": 8}))
            outcome.append("emitted")
        except Stopped:
            outcome.append("stopped")

    worker = threading.Thread(target=emit)
    worker.start()
    stop.set()
    worker.join(timeout=10)
    assert outcome == ["stopped"]
    assert emitted == []


def test_sleep_raises_stopped_once_stop_is_set() -> None:
    stop, resumed = threading.Event(), threading.Event()
    resumed.set()
    stop.set()
    with pytest.raises(Stopped):
        _context([], stop, resumed).sleep(30)


def test_offset_keys_follow_kafka_connects_shape() -> None:
    assert offset_key("erp-orders", {"table": "orders"}) == '["erp-orders",{"table":"orders"}]'


def test_batches_published_by_a_helper_process_are_counted_and_show_progress() -> None:
    counted: list[tuple[str, int, int]] = []
    progressed: list[bool] = []
    context = SourceContext(
        "orders",
        offsets=[],
        emit=lambda _: None,
        stop=threading.Event(),
        resumed=threading.Event(),
        on_progress=lambda: progressed.append(True),
        count=lambda topic, records, dead: counted.append((topic, records, dead)),
    )
    context.published_elsewhere("erp.orders", records=250, dead_lettered=2)
    assert counted == [("erp.orders", 250, 2)]
    assert progressed == [True]  # a snapshot read by helpers ends a run of retries too
    assert context.stored == []  # a helper commits no position
