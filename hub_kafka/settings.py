"""Settings of the Kafka client side and the local broker (environment prefix `HUB_KAFKA_`).

The security settings (`security_protocol`, `sasl_*`, `ssl_*`) are one description of how to
reach a secured cluster; `hub_kafka.security` turns them into librdkafka configuration and
Spark Kafka options, so every client of the hub connects the same way (ADR 0024).
"""

from enum import StrEnum, unique
from pathlib import Path

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from hub_core.settings import default_home


@unique
class SecurityProtocol(StrEnum):
    """How clients talk to the brokers: Kafka's own names."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)


@unique
class SaslMechanism(StrEnum):
    """The SASL mechanisms the hub's clients support, as Kafka names them."""

    SCRAM_SHA_512 = "SCRAM-SHA-512"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    PLAIN = "PLAIN"


@unique
class EndpointIdentification(StrEnum):
    """Whether clients check that a broker's certificate names the host they connect to."""

    HTTPS = "https"
    NONE = "none"


@unique
class BrokerSecurity(StrEnum):
    """The client listener of the local broker."""

    PLAINTEXT = "plaintext"
    SASL_SSL = "sasl_ssl"


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
        default=0,
        ge=0,
        description=(
            "How long the producer waits to fill a batch. 0: a publish request is answered "
            "after Kafka's acknowledgement, so a wait here is added to every request; records "
            "sent while earlier batches are in flight still travel together. A few "
            "milliseconds cost each one-record request that much and save librdkafka about "
            "a fifth of its CPU per record in large batches (docs/adr/0031)."
        ),
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
    replication_factor: int | None = Field(
        default=None,
        ge=1,
        description=(
            "Replicas of every topic the hub creates (feeds, their DLQs, connector state). "
            "Unset: 3 on a cluster of three or more brokers, else the broker count, asked of "
            "the cluster when a topic is created."
        ),
    )
    min_insync_replicas: int | None = Field(
        default=None,
        ge=1,
        description=(
            "`min.insync.replicas` of every topic the hub creates: how many replicas must hold "
            "a record before it is acknowledged (producers use acks=all). Unset: one less than "
            "the replication factor, at least 1 (2 with 3 replicas)."
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
    broker_security: BrokerSecurity = Field(
        default=BrokerSecurity.PLAINTEXT,
        description=(
            "Client listener of the local broker: `plaintext`, or `sasl_ssl` (TLS with a CA "
            "and broker certificate made at first start under `<broker_home>/tls`, and SCRAM "
            "users created when the storage is formatted). `hub kafka start --sasl-ssl` sets it."
        ),
    )
    security_protocol: SecurityProtocol = Field(
        default=SecurityProtocol.PLAINTEXT,
        description="How clients reach the brokers: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
    )
    sasl_mechanism: SaslMechanism = Field(
        default=SaslMechanism.SCRAM_SHA_512,
        description="SASL mechanism with SASL_*: SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN.",
    )
    sasl_username: str | None = Field(
        default=None, description="SASL user name; required with SASL_PLAINTEXT and SASL_SSL."
    )
    sasl_password: SecretStr | None = Field(
        default=None, description="SASL password (or give `sasl_password_file`)."
    )
    sasl_password_file: Path | None = Field(
        default=None,
        description="File holding the SASL password (a mounted secret); trailing newline ignored.",
    )
    ssl_ca_location: Path | None = Field(
        default=None,
        description=(
            "PEM file of the CA(s) that signed the brokers' certificates. Brokers are always "
            "verified; without this, the system's CA store is used."
        ),
    )
    ssl_certificate_location: Path | None = Field(
        default=None, description="PEM client certificate, for brokers that require mTLS."
    )
    ssl_key_location: Path | None = Field(
        default=None, description="PEM (PKCS#8) private key of `ssl_certificate_location`."
    )
    ssl_key_password: SecretStr | None = Field(
        default=None, description="Password of an encrypted `ssl_key_location` (or a file)."
    )
    ssl_key_password_file: Path | None = Field(
        default=None, description="File holding the password of `ssl_key_location`."
    )
    ssl_endpoint_identification: EndpointIdentification = Field(
        default=EndpointIdentification.HTTPS,
        description=(
            "`https`: a broker's certificate must name the host the client connects to; "
            "`none` turns that check off (the certificate is still verified against the CA)."
        ),
    )

    @model_validator(mode="after")
    def _ports_differ(self) -> "KafkaSettings":
        if self.broker_port == self.controller_port:
            raise ValueError(
                f"HUB_KAFKA_BROKER_PORT and HUB_KAFKA_CONTROLLER_PORT are both {self.broker_port}: "
                "the local broker needs two different ports"
            )
        return self

    @model_validator(mode="after")
    def _replicas_fit(self) -> "KafkaSettings":
        rf, isr = self.replication_factor, self.min_insync_replicas
        if rf is not None and isr is not None and isr > rf:
            raise ValueError(
                f"HUB_KAFKA_MIN_INSYNC_REPLICAS ({isr}) is above HUB_KAFKA_REPLICATION_FACTOR "
                f"({rf}): no record could ever be acknowledged"
            )
        return self

    @model_validator(mode="after")
    def _security_is_complete(self) -> "KafkaSettings":
        """Refuse combinations a client could only fail on later, naming the setting to fix."""
        protocol = self.security_protocol
        if protocol.uses_sasl:
            if not self.sasl_username:
                raise ValueError(
                    f"HUB_KAFKA_SECURITY_PROTOCOL is {protocol}: set HUB_KAFKA_SASL_USERNAME"
                )
            if self.sasl_password is None and self.sasl_password_file is None:
                raise ValueError(
                    f"HUB_KAFKA_SECURITY_PROTOCOL is {protocol}: set HUB_KAFKA_SASL_PASSWORD "
                    "or HUB_KAFKA_SASL_PASSWORD_FILE"
                )
        _only_one(self.sasl_password, self.sasl_password_file, "SASL_PASSWORD")
        _only_one(self.ssl_key_password, self.ssl_key_password_file, "SSL_KEY_PASSWORD")
        if (self.ssl_certificate_location is None) != (self.ssl_key_location is None):
            raise ValueError(
                "HUB_KAFKA_SSL_CERTIFICATE_LOCATION and HUB_KAFKA_SSL_KEY_LOCATION go together: "
                "set both for a client certificate, or neither"
            )
        if not protocol.uses_tls and (self.ssl_ca_location or self.ssl_certificate_location):
            raise ValueError(
                f"HUB_KAFKA_SSL_* files are set but HUB_KAFKA_SECURITY_PROTOCOL is {protocol}: "
                "use SSL or SASL_SSL"
            )
        for name in ("ssl_ca_location", "ssl_certificate_location", "ssl_key_location",
                     "sasl_password_file", "ssl_key_password_file"):  # fmt: skip
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise ValueError(f"HUB_KAFKA_{name.upper()}: no file at {path}")
        return self

    def sasl_password_value(self) -> str | None:
        """The SASL password, from the setting or its file."""
        return _secret(self.sasl_password, self.sasl_password_file)

    def ssl_key_password_value(self) -> str | None:
        """The client key's password, from the setting or its file."""
        return _secret(self.ssl_key_password, self.ssl_key_password_file)


def _only_one(value: SecretStr | None, file: Path | None, name: str) -> None:
    if value is not None and file is not None:
        raise ValueError(f"Set HUB_KAFKA_{name} or HUB_KAFKA_{name}_FILE, not both")


def _secret(value: SecretStr | None, file: Path | None) -> str | None:
    if value is not None:
        return value.get_secret_value()
    if file is not None:
        return file.read_text().rstrip("\r\n")
    return None
