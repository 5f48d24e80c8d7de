"""Errors of the Kafka side of the hub."""

from hub_core.errors import ErrorCode, LocalServiceFailed, TerminalError, TransientError


class KafkaUnavailable(TransientError):
    """Kafka did not answer or did not acknowledge; the same request may succeed later (503)."""

    code = ErrorCode.KAFKA_UNAVAILABLE


class KafkaRefused(TerminalError):
    """Kafka answered and refused a topic operation: asking again cannot help. The hub checks
    what a user asks for before asking Kafka, so what is left is the cluster's own rules."""

    code = ErrorCode.KAFKA_REFUSED

    def __init__(self, action: str, *, reason: str) -> None:
        super().__init__(
            f"Kafka refused to {action}: {reason}. This is a rule of the Kafka cluster (a "
            "topic policy, ACLs, or more replicas than brokers, see "
            "HUB_KAFKA_REPLICATION_FACTOR): ask its operator."
        )


class TopicNameCollides(TerminalError):
    """Kafka refuses a topic whose name equals an existing one's once '.' and '_' are made the
    same (their metric names would clash); for the hub such topics also share table names."""

    code = ErrorCode.TABLE_NAME_TAKEN

    def __init__(self, topic: str, *, existing: str) -> None:
        super().__init__(
            f"Topic '{topic}' cannot be created: Kafka refuses it because it differs from the "
            f"existing topic '{existing}' only in '.' and '_', and the two would also share "
            "their table names. Choose a topic that differs in more than '.' and '_'."
        )


class BrokerError(LocalServiceFailed):
    """The local broker could not be started or stopped."""


class KafkaAuthFailed(TerminalError):
    """The brokers refused the hub's SASL login: only new credentials help, not a retry."""

    code = ErrorCode.KAFKA_AUTH_FAILED

    def __init__(self, servers: str, *, mechanism: str, username: str, detail: str) -> None:
        super().__init__(
            f"Kafka at {servers} refused the SASL login of user '{username}' ({mechanism}): "
            f"{detail}. Check HUB_KAFKA_SASL_USERNAME, HUB_KAFKA_SASL_PASSWORD (or "
            "HUB_KAFKA_SASL_PASSWORD_FILE) and HUB_KAFKA_SASL_MECHANISM."
        )


class KafkaTlsFailed(TerminalError):
    """The TLS handshake with the brokers failed (most often: their certificate is not signed
    by a CA the hub trusts); only new settings or certificates help, not a retry."""

    code = ErrorCode.KAFKA_TLS_FAILED

    def __init__(self, servers: str, *, detail: str) -> None:
        super().__init__(
            f"The TLS handshake with Kafka at {servers} failed: {detail}. Check "
            "HUB_KAFKA_SSL_CA_LOCATION (the PEM of the CA that signed the brokers' "
            "certificates), HUB_KAFKA_SSL_ENDPOINT_IDENTIFICATION and, for mTLS, "
            "HUB_KAFKA_SSL_CERTIFICATE_LOCATION and HUB_KAFKA_SSL_KEY_LOCATION."
        )
