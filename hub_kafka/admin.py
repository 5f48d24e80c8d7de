"""Topic administration: creating feed topics with their settings, describing and deleting them."""

import logging
import re
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from hub_kafka.errors import KafkaRefused, KafkaUnavailable, TopicNameCollides
from hub_kafka.handles import Admin
from hub_kafka.security import client_config
from hub_kafka.settings import KafkaSettings

log = logging.getLogger(__name__)

_TIMEOUT_S = 30.0
# How Kafka names the topic a new one collides with (`Topic.hasCollision` in its source).
_COLLIDES = re.compile(r"collides with existing topic: (\S+)")
# Kafka's answers that refuse a topic operation itself. Kafka was reached, and asking again
# cannot help, so they are not answered 503 "check that Kafka is reachable" as the others are.
_REFUSALS = frozenset(
    {
        KafkaError.INVALID_CONFIG,
        KafkaError.POLICY_VIOLATION,
        KafkaError.TOPIC_EXCEPTION,  # an invalid topic name
        KafkaError.INVALID_PARTITIONS,
        KafkaError.INVALID_REPLICATION_FACTOR,
        KafkaError.INVALID_REPLICA_ASSIGNMENT,
        KafkaError.INVALID_REQUEST,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
)


@dataclass(frozen=True, slots=True)
class TopicState:
    """What Kafka says about a topic: its partitions and the next offset of each."""

    partitions: int
    end_offsets: dict[int, int]


class TopicAdmin:
    """Creates, alters, describes and deletes topics; every failure says what Kafka answered."""

    def __init__(self, settings: KafkaSettings) -> None:
        self._settings = settings
        self._admin = Admin(client_config(settings), owner="topic admin")
        self._brokers: int | None = None  # asked of the cluster once, at the first create

    def create(self, topic: str, *, partitions: int, config: dict[str, str]) -> bool:
        """Create `topic`; False when it already exists (its settings are then left as they are),
        40924 when it differs from an existing topic only in '.' and '_'."""
        replicas, min_insync = self.replication()
        config = {"min.insync.replicas": str(min_insync), **config}
        new = NewTopic(topic, num_partitions=partitions, replication_factor=replicas, config=config)
        try:
            self._admin.client.create_topics([new], operation_timeout=_TIMEOUT_S)[topic].result(
                _TIMEOUT_S
            )
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return False
            collision = _COLLIDES.search(exc.args[0].str())
            if exc.args[0].code() == KafkaError.TOPIC_EXCEPTION and collision:
                raise TopicNameCollides(topic, existing=collision.group(1)) from exc
            raise self._failure(f"create topic '{topic}'", exc) from exc
        log.info(
            "created topic %s (%d partitions, %d replicas, %s)", topic, partitions, replicas, config
        )
        return True

    def replication(self) -> tuple[int, int]:
        """The replication factor and `min.insync.replicas` of the topics the hub creates.

        From the settings when given; else they follow the cluster: 3 replicas with 2 in sync
        on three or more brokers (a record acknowledged with acks=all survives the loss of any
        one broker, and publishing goes on while one is down), one per broker below that.
        """
        replicas = self._settings.replication_factor
        if replicas is None:
            replicas = min(3, self._broker_count())
        min_insync = self._settings.min_insync_replicas
        if min_insync is None:
            min_insync = max(1, replicas - 1)
        return replicas, min_insync

    def _broker_count(self) -> int:
        if self._brokers is None:
            try:
                brokers = self._admin.client.list_topics(timeout=10).brokers
            except KafkaException as exc:
                raise self._unavailable("count the brokers", exc) from exc
            self._brokers = max(1, len(brokers))
        return self._brokers

    def alter(self, topic: str, *, config: dict[str, str]) -> None:
        """Set topic configuration entries (incrementally; others keep their values)."""
        resource = ConfigResource(
            ConfigResource.Type.TOPIC,
            topic,
            incremental_configs=[
                ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
                for name, value in config.items()
            ],
        )
        try:
            for future in self._admin.client.incremental_alter_configs([resource]).values():
                future.result(_TIMEOUT_S)
        except KafkaException as exc:
            raise self._failure(f"alter topic '{topic}'", exc) from exc

    def delete(self, topic: str) -> bool:
        """Delete `topic`; False when it did not exist."""
        try:
            self._admin.client.delete_topics([topic], operation_timeout=_TIMEOUT_S)[topic].result(
                _TIMEOUT_S
            )
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return False
            raise self._failure(f"delete topic '{topic}'", exc) from exc
        log.info("deleted topic %s", topic)
        return True

    def exists(self, topic: str) -> bool:
        """Whether Kafka has `topic` (a metadata request; no consumer is started)."""
        try:
            metadata = self._admin.client.list_topics(topic, timeout=10)
        except KafkaException as exc:
            raise self._unavailable(f"describe topic '{topic}'", exc) from exc
        described = metadata.topics.get(topic)
        return described is not None and described.error is None

    def state(self, topic: str) -> TopicState | None:
        """Partitions and end offsets of `topic`, or None when it does not exist."""
        try:
            metadata = self._admin.client.list_topics(topic, timeout=10)
        except KafkaException as exc:
            raise self._unavailable(f"describe topic '{topic}'", exc) from exc
        described = metadata.topics.get(topic)
        if described is None or described.error is not None:
            return None
        consumer = Consumer({**client_config(self._settings), "group.id": "hub-admin"})
        try:
            ends = {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in sorted(described.partitions)
            }
        except KafkaException as exc:
            raise self._unavailable(f"read offsets of '{topic}'", exc) from exc
        finally:
            consumer.close()
        return TopicState(partitions=len(described.partitions), end_offsets=ends)

    def ping(self, *, timeout_s: float = 3.0) -> bool:
        """Whether a broker answers a metadata request in time."""
        try:
            return bool(self._admin.client.list_topics(timeout=timeout_s).brokers)
        except (KafkaException, KafkaUnavailable):
            return False

    def close(self) -> None:
        """Destroy the client now (`hub_kafka.handles`); later calls raise 50301, `ping` answers
        False."""
        self._admin.close()

    def _failure(self, action: str, exc: KafkaException) -> KafkaRefused | KafkaUnavailable:
        """What a failed topic operation is: refused by Kafka (50020), or Kafka unavailable."""
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError) and error.code() in _REFUSALS:
            return KafkaRefused(action, reason=error.str())
        return self._unavailable(action, exc)

    def _unavailable(self, action: str, exc: KafkaException) -> KafkaUnavailable:
        return KafkaUnavailable(
            f"Could not {action}: {exc.args[0].str() if exc.args else exc}. "
            f"Check that Kafka at {self._settings.bootstrap_servers} is reachable."
        )
