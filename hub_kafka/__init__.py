"""The central log: Kafka producing, topic administration and the local single-node broker."""

from hub_kafka.producer import Delivery, FeedProducer, OutgoingRecord
from hub_kafka.settings import KafkaSettings
from hub_kafka.topics import TopicName, bronze_table, topic_name

__all__ = [
    "Delivery",
    "FeedProducer",
    "KafkaSettings",
    "OutgoingRecord",
    "TopicName",
    "bronze_table",
    "topic_name",
]
