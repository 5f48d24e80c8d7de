"""What a record's delivery report costs: the hub's two producers, and librdkafka's ways to report.

Against the local broker, each way sends `--records` records (a 5-byte frame and 60 bytes of
value, a key each) to a topic of its own in batches of `--batch`, waiting for each batch before
the next as a connector task does, with the hub's producer settings (idempotent, `acks=all`,
lz4, `linger.ms` 10), and garbage collected as a connector process collects it. The ways take
turns, `--rounds` times:

- `FeedProducer.produce_encoded`: the shared producer, a report per record (the API's);
- `BatchProducer.produce_encoded`: failures only, each batch awaited with `flush` (a
  connector task's, ADR 0057);
- confluent-kafka by itself: a callback per record; one callback for every record (set in the
  configuration); failures only (`delivery.report.only.error`) and `flush`.

It prints each way's median CPU per record (this process: Python and librdkafka's threads), its
median wall time, each against `FeedProducer`'s, and the peak RSS of the broker and of this
process.

    .venv/bin/python bench/delivery_reports.py    # about a minute on 2 cores
"""

import argparse
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from confluent_kafka import Producer  # noqa: E402

from bench.servers import print_peak_rss  # noqa: E402
from connectors.garbage_collection import settle_garbage_collector  # noqa: E402
from connectors.settings import ConnectSettings  # noqa: E402
from hub_kafka.admin import TopicAdmin  # noqa: E402
from hub_kafka.local_broker import LocalBroker  # noqa: E402
from hub_kafka.producer import BatchProducer, EncodedRecord, FeedProducer  # noqa: E402
from hub_kafka.settings import KafkaSettings  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

HUB_HOME = Path(__file__).resolve().parents[1] / ".hub"
VALUE = b"\x00\x00\x00\x00\x01" + b"v" * 60

# Sends one batch and waits for it.
Send = Callable[[Sequence[EncodedRecord]], None]
Way = tuple[Send, Callable[[], object]]  # how to send a batch, and how to close the producer


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def raw_config(settings: KafkaSettings) -> dict[str, object]:
    """confluent-kafka with the hub's producer settings."""
    return {
        "bootstrap.servers": settings.bootstrap_servers,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": settings.linger_ms,
        "compression.type": "lz4",
        "queue.buffering.max.messages": settings.producer_queue_max_messages,
    }


def per_record_callback(settings: KafkaSettings) -> Way:
    producer = Producer(raw_config(settings))

    def send(batch: Sequence[EncodedRecord]) -> None:
        reports: list[tuple[int, int] | None] = [None] * len(batch)
        for index, (topic, key, value, _, _) in enumerate(batch):

            def stored(err: object, msg: object, index: int = index) -> None:
                reports[index] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

            producer.produce(topic, value, key, on_delivery=stored)
        producer.flush(30)

    return send, producer.close


def one_callback(settings: KafkaSettings) -> Way:
    stored = [0]

    def count(err: object, msg: object) -> None:
        stored[0] += 1

    return _flushed(Producer({**raw_config(settings), "on_delivery": count}))


def failures_only(settings: KafkaSettings) -> Way:
    return _flushed(Producer({**raw_config(settings), "delivery.report.only.error": True}))


def _flushed(producer: Producer) -> Way:
    """Records handed over with no callback of their own, each batch awaited with `flush`."""

    def send(batch: Sequence[EncodedRecord]) -> None:
        for topic, key, value, _, _ in batch:
            producer.produce(topic, value, key)
        producer.flush(30)

    return send, producer.close


def feed_producer(settings: KafkaSettings) -> Way:
    producer = FeedProducer(settings)
    return (lambda batch: _all_stored(producer.produce_encoded(batch))), producer.close


def batch_producer(settings: KafkaSettings) -> Way:
    producer = BatchProducer(settings)
    return (lambda batch: _all_stored(producer.produce_encoded(batch))), producer.close


def _all_stored(reports: Sequence[object]) -> None:
    if not all(type(report) is tuple for report in reports):
        raise RuntimeError("a record was not stored; the figures would not compare")


WAYS: dict[str, Callable[[KafkaSettings], Way]] = {
    "FeedProducer": feed_producer,
    "BatchProducer": batch_producer,
    "a callback per record": per_record_callback,
    "one callback for all": one_callback,
    "failures only": failures_only,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000, help="records per way and round")
    parser.add_argument("--batch", type=int, default=20_000, help="records awaited together")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, taking turns")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="hub-bench-delivery-"))
    broker_settings = KafkaSettings(
        broker_home=home / "kafka",
        broker_jars_dir=HUB_HOME / "jars" / "kafka",
        broker_port=free_port(),
        controller_port=free_port(),
    )
    broker = LocalBroker(broker_settings)
    progress("starting the broker")
    broker.start()
    try:
        settings = KafkaSettings(bootstrap_servers=broker.bootstrap_servers, linger_ms=10)
        admin = TopicAdmin(settings)
        topics = {name: f"bench-delivery-{n}" for n, name in enumerate(WAYS)}
        for topic in topics.values():
            admin.create(topic, partitions=1, config={})
        admin.close()
        records: dict[str, list[EncodedRecord]] = {
            name: [(topic, f"k{n}".encode(), VALUE, None, None) for n in range(args.records)]
            for name, topic in topics.items()
        }
        # As a connector process collects garbage (`connectors.garbage_collection`):
        # the records built above left out of collections, the youngest generation larger.
        settle_garbage_collector(ConnectSettings())
        cpu_us: dict[str, list[float]] = {name: [] for name in WAYS}
        wall_s: dict[str, list[float]] = {name: [] for name in WAYS}
        for round_number in range(1, args.rounds + 1):
            for name, way in WAYS.items():
                send, close = way(settings)
                send(records[name][:100])  # connected, and the producer id acquired
                cpu, start = cpu_seconds(), time.monotonic()
                for first in range(0, args.records, args.batch):
                    send(records[name][first : first + args.batch])
                wall_s[name].append(time.monotonic() - start)
                cpu_us[name].append((cpu_seconds() - cpu) / args.records * 1e6)
                close()
                progress(f"round {round_number}: {name}: {cpu_us[name][-1]:.2f} us of CPU a "
                         f"record, {wall_s[name][-1]:.2f} s")  # fmt: skip
        base_cpu = statistics.median(cpu_us["FeedProducer"])
        base_wall = statistics.median(wall_s["FeedProducer"])
        print(f"\n{args.records:,} records in batches of {args.batch:,}, medians of "
              f"{args.rounds} rounds taking turns")  # fmt: skip
        for name in WAYS:
            cpu, wall = statistics.median(cpu_us[name]), statistics.median(wall_s[name])
            print(f"  {name:<22} {cpu:5.2f} us of CPU a record ({cpu / base_cpu:.2f} of "
                  f"FeedProducer's), {wall:5.2f} s ({wall / base_wall:.2f})")  # fmt: skip
        print_peak_rss({"Kafka broker": broker.status().pid})
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
