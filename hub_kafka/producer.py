"""An idempotent, acks=all producer that answers per record only after Kafka acknowledged it."""

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from hub_kafka.errors import KafkaUnavailable
from hub_kafka.settings import KafkaSettings
from hub_kafka.topics import TopicName

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OutgoingRecord:
    """A record ready for Kafka: already encoded key and value bytes."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes]] = ()
    timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Delivery:
    """What Kafka said about one record: where it landed, or why it did not."""

    partition: int | None = None
    offset: int | None = None
    error: str | None = None
    retriable: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


class FeedProducer:
    """A shared producer; a background thread serves delivery reports to waiting requests."""

    def __init__(self, settings: KafkaSettings) -> None:
        self._settings = settings
        self._producer = Producer(
            {
                "bootstrap.servers": settings.bootstrap_servers,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": settings.linger_ms,
                "delivery.timeout.ms": settings.delivery_timeout_ms,
                "compression.type": "lz4",
                "error_cb": _log_client_error,
            }
        )
        self._admin = AdminClient({"bootstrap.servers": settings.bootstrap_servers})
        self._known_topics: set[str] = set()
        self._topics_lock = threading.Lock()
        self._closed = threading.Event()
        self._poller = threading.Thread(
            target=self._serve_reports, name="kafka-delivery", daemon=True
        )
        self._poller.start()

    def produce(self, topic: TopicName, records: Sequence[OutgoingRecord]) -> list[Delivery]:
        """Send `records` and wait until Kafka acknowledged or failed each one."""
        futures: list[Future[Delivery]] = []
        for record in records:
            future: Future[Delivery] = Future()
            futures.append(future)
            self._enqueue(topic, record, future)
        # delivery.timeout.ms bounds every report; the margin covers the poll interval.
        wait(futures, timeout=self._settings.delivery_timeout_ms / 1000 + 5)
        return [
            f.result()
            if f.done()
            else Delivery(error="Kafka did not acknowledge the record in time.", retriable=True)
            for f in futures
        ]

    def _enqueue(self, topic: str, record: OutgoingRecord, future: "Future[Delivery]") -> None:
        def report(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                future.set_result(Delivery(error=err.str(), retriable=err.retriable()))
            else:
                future.set_result(Delivery(partition=msg.partition(), offset=msg.offset()))

        while True:
            try:
                self._producer.produce(
                    topic,
                    value=record.value,
                    key=record.key,
                    headers=list(record.headers) or None,
                    timestamp=record.timestamp_ms or 0,
                    on_delivery=report,
                )
                return
            except BufferError:
                # The local queue is full: let deliveries drain, then try again.
                self._producer.poll(0.05)
            except KafkaException as exc:
                future.set_result(Delivery(error=str(exc), retriable=False))
                return

    def ensure_topic(self, topic: TopicName, *, partitions: int | None = None) -> None:
        """Create `topic` if it does not exist yet (idempotent, cached per process)."""
        if topic in self._known_topics:
            return
        with self._topics_lock:
            if topic in self._known_topics:
                return
            try:
                existing = self._admin.list_topics(timeout=10).topics
            except KafkaException as exc:
                raise KafkaUnavailable(
                    f"Kafka at {self._settings.bootstrap_servers} is unreachable: {exc}. "
                    "Check HUB_KAFKA_BOOTSTRAP_SERVERS and that the broker is running."
                ) from exc
            if topic not in existing:
                new = NewTopic(
                    topic,
                    num_partitions=partitions or self._settings.default_partitions,
                    replication_factor=-1,
                )
                future = self._admin.create_topics([new])[topic]
                try:
                    future.result(timeout=30)
                    log.info("created topic %s", topic)
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                        raise KafkaUnavailable(f"Could not create topic '{topic}': {exc}") from exc
            self._known_topics.add(topic)

    def close(self) -> None:
        """Deliver what is queued (bounded by the delivery timeout), then stop the poller."""
        self._producer.flush(self._settings.delivery_timeout_ms / 1000)
        self._closed.set()
        self._poller.join(timeout=5)

    def _serve_reports(self) -> None:
        while not self._closed.is_set():
            self._producer.poll(0.1)


def _log_client_error(err: KafkaError) -> None:
    log.warning("kafka client: %s", err.str())
