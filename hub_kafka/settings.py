"""Settings of the Kafka client side and the local broker (environment prefix `HUB_KAFKA_`)."""

from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from hub_core.settings import default_home


class KafkaSettings(BaseSettings):
    """How the hub reaches Kafka, and where the local broker keeps its state."""

    model_config = SettingsConfigDict(env_prefix="HUB_KAFKA_", extra="ignore")

    bootstrap_servers: str = Field(
        default="127.0.0.1:9092",
        description="Kafka bootstrap servers, comma-separated host:port pairs.",
    )
    delivery_timeout_ms: int = Field(
        default=30_000,
        ge=1_000,
        description=(
            "How long the producer keeps retrying a record before reporting it as failed; "
            "a publish request waits at most this long for Kafka's acknowledgement."
        ),
    )
    linger_ms: int = Field(
        default=5, ge=0, description="How long the producer waits to fill a batch."
    )
    producer_queue_max_messages: int = Field(
        default=100_000,
        ge=1,
        description=(
            "Most records a producer holds unacknowledged (librdkafka's "
            "`queue.buffering.max.messages`); past it, publishing waits for room. Bounds the "
            "memory used while Kafka is slow or away."
        ),
    )
    producer_queue_max_kbytes: int = Field(
        default=65_536,
        ge=1,
        description=(
            "Most kilobytes of records a producer holds unacknowledged (librdkafka's "
            "`queue.buffering.max.kbytes`); with `producer_queue_max_messages`, bounds the "
            "memory publishing uses while Kafka is slow or away."
        ),
    )
    producer_queue_wait_ms: int = Field(
        default=5_000,
        ge=0,
        description=(
            "How long a publish request waits for room in a full producer queue; records "
            "still not handed to Kafka then are answered 503 (code 50305), unsent."
        ),
    )
    max_record_bytes: int = Field(
        default=1_000_000,
        ge=1024,
        description=(
            "Largest record the hub produces: its encoded value, key and headers plus their "
            "framing. A larger record is refused (413, code 41302) before it reaches Kafka, "
            "and the other records of its batch go on. The default is the producer's "
            "`message.max.bytes`, below the broker's (1048588); keep it at most the smallest "
            "`max.message.bytes` of the hub's topics."
        ),
    )
    broker_home: Path = Field(
        default_factory=lambda: default_home() / "kafka",
        description="State directory of the local broker (data, logs, pid file).",
    )
    broker_jars_dir: Path = Field(
        default_factory=lambda: default_home() / "jars" / "kafka",
        description="Folder with the Kafka broker's jars, fetched by `make jars`.",
    )
    broker_port: int = Field(default=9092, description="Client port of the local broker.")
    controller_port: int = Field(
        default=9093, description="KRaft controller port of the local broker."
    )
    broker_heap: str = Field(default="512m", description="Java heap size of the local broker.")

    @model_validator(mode="after")
    def _ports_differ(self) -> "KafkaSettings":
        if self.broker_port == self.controller_port:
            raise ValueError(
                f"HUB_KAFKA_BROKER_PORT and HUB_KAFKA_CONTROLLER_PORT are both {self.broker_port}: "
                "the local broker needs two different ports"
            )
        return self
