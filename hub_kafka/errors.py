"""Errors of the Kafka side of the hub."""

from hub_core.errors import ErrorCode, LocalServiceFailed, TerminalError, TransientError


class KafkaUnavailable(TransientError):
    """Kafka did not answer or did not acknowledge; the same request may succeed later (503)."""

    code = ErrorCode.KAFKA_UNAVAILABLE


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
