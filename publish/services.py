"""The publish path wired up from settings, once for every process that publishes.

The API and the connector worker build the same services from the same settings, so a record is
checked, cleaned, encoded and acknowledged the same way whichever door it came in by.
"""

from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import Engine

from catalog.feeds import FeedStore
from catalog.idempotency import DEFAULT_TTL, IdempotencyStore
from hub_core.database import create_database_engine
from hub_kafka.access import check_access
from hub_kafka.admin import TopicAdmin
from hub_kafka.producer import BatchProducer, FeedProducer, TransactionalProducers
from hub_kafka.settings import KafkaSettings
from publish.feeds import NO_QUOTAS, FeedQuotas, FeedService
from publish.idempotent import IdempotentRequests
from publish.publisher import Publisher
from registry.service import RegistryService
from registry.settings import RegistrySettings
from registry.store import SchemaStore


@dataclass
class PublishServices:
    """The database engine, the registry, feeds and `Publisher` over one idempotent producer."""

    engine: Engine
    registry: RegistryService
    feeds: FeedService
    publisher: Publisher
    idempotency: IdempotentRequests
    producer: FeedProducer
    admin: TopicAdmin
    transactions: TransactionalProducers | None
    kafka: KafkaSettings
    batch_producers: list[BatchProducer] = field(default_factory=list)

    def batch_publisher(self) -> Publisher:
        """A `Publisher` over a `BatchProducer` of its own, for one thread that publishes batch
        after batch and waits for each (a connector task); closed with the services."""
        producer = BatchProducer(self.kafka)
        self.batch_producers.append(producer)
        return Publisher(self.registry, producer, max_record_bytes=self.kafka.max_record_bytes)

    def close(self) -> None:
        """Flush and close the producers and the topic admin, then the database connections."""
        if self.transactions is not None:
            self.transactions.close()
        for producer in self.batch_producers:
            producer.close()
        self.producer.close()
        self.admin.close()
        self.registry.close()
        self.engine.dispose()


def publish_services(
    registry: RegistrySettings,
    kafka: KafkaSettings,
    *,
    transactional_id_prefix: str | None = None,
    transactional_producers: int = 0,
    idempotency_ttl: timedelta = DEFAULT_TTL,
    feed_quotas: FeedQuotas = NO_QUOTAS,
) -> PublishServices:
    """Wire the hub's database and Kafka into the publish path.

    With a `transactional_id_prefix`, atomic batches are published through a pool of
    `transactional_producers` transactional producers (the API); without one, `Publisher`
    refuses atomic batches (connectors never send them). Stored idempotent answers expire after
    `idempotency_ttl`. New feeds are held to `feed_quotas` (none by default).
    """
    # A wrong Kafka password or CA fails the API or connector at start, with a coded error.
    check_access(kafka)
    engine = create_database_engine(registry.database_url, pool_size=registry.pool_size)
    service = RegistryService(
        SchemaStore(engine, watch_changes=True),
        default_compatibility=registry.default_compatibility,
        cache_seconds=registry.cache_seconds,
        limits=registry.schema_limits(),
        parse_cache_bytes=registry.parse_cache_bytes,
        read_cache_bytes=registry.read_cache_bytes,
    )
    producer = FeedProducer(kafka)
    transactions = (
        TransactionalProducers(
            kafka, id_prefix=transactional_id_prefix, size=transactional_producers
        )
        if transactional_id_prefix is not None
        else None
    )
    admin = TopicAdmin(kafka)
    return PublishServices(
        engine=engine,
        registry=service,
        feeds=FeedService(
            FeedStore(engine),
            service,
            admin,
            cache_seconds=registry.cache_seconds,
            quotas=feed_quotas,
        ),
        publisher=Publisher(
            service, producer, transactions, max_record_bytes=kafka.max_record_bytes
        ),
        idempotency=IdempotentRequests(IdempotencyStore(engine, ttl=idempotency_ttl)),
        producer=producer,
        admin=admin,
        transactions=transactions,
        kafka=kafka,
    )
