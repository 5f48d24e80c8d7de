"""Topics the hub creates are replicated by the cluster's size: on one broker, 1 and 1."""

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from hub_kafka.admin import TopicAdmin
from hub_kafka.settings import KafkaSettings
from tests.support.hub_client import unique_topic

pytestmark = pytest.mark.integration


def test_a_single_broker_gets_one_replica_and_one_in_sync(kafka_bootstrap: str) -> None:
    admin = TopicAdmin(KafkaSettings(bootstrap_servers=kafka_bootstrap))
    topic = unique_topic("replicas")

    assert admin.replication() == (1, 1)
    assert admin.create(topic, partitions=1, config={})

    client = AdminClient({"bootstrap.servers": kafka_bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    config = client.describe_configs([resource])[resource].result(30)
    assert config["min.insync.replicas"].value == "1"
    partition = client.list_topics(topic, timeout=10).topics[topic].partitions[0]
    assert len(partition.replicas) == 1
