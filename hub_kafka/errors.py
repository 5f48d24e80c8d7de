"""Errors of the Kafka side of the hub."""

from hub_core.errors import ErrorCode, LocalServiceFailed, TransientError


class KafkaUnavailable(TransientError):
    """Kafka did not answer or did not acknowledge; the same request may succeed later (503)."""

    code = ErrorCode.KAFKA_UNAVAILABLE


class BrokerError(LocalServiceFailed):
    """The local broker could not be started or stopped."""
