"""Failing fast, with a coded error, when Kafka refuses the hub's credentials or certificates.

librdkafka reports a refused SASL login or a failed TLS handshake through its error callback as
soon as it happens, while the operations that meet them only time out (30 s or more) with a
message that hides the cause. `check_access` runs one connection at start and turns those
reports into `KafkaAuthFailed` / `KafkaTlsFailed`, naming the setting to fix (ADR 0024).
"""

import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from hub_kafka.errors import KafkaAuthFailed, KafkaTlsFailed
from hub_kafka.security import client_config
from hub_kafka.settings import KafkaSettings, SecurityProtocol

log = logging.getLogger(__name__)


def security_failure(
    error: KafkaError, settings: KafkaSettings
) -> KafkaAuthFailed | KafkaTlsFailed | None:
    """The coded error for a librdkafka error that no retry can fix (a refused login, a
    certificate the client does not trust), or None for any other error."""
    code = error.code()
    if code in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
        if "SSL" in error.str() and not settings.security_protocol.uses_sasl:
            return KafkaTlsFailed(settings.bootstrap_servers, detail=error.str())
        return KafkaAuthFailed(
            settings.bootstrap_servers,
            mechanism=settings.sasl_mechanism.value,
            username=settings.sasl_username or "",
            detail=error.str(),
        )
    if code == KafkaError._SSL or (
        code == KafkaError._TRANSPORT and "SSL handshake failed" in error.str()
    ):
        return KafkaTlsFailed(settings.bootstrap_servers, detail=error.str())
    return None


def check_access(settings: KafkaSettings, *, timeout_s: float = 15.0) -> None:
    """Connect once and fail with `KafkaAuthFailed` or `KafkaTlsFailed` if the brokers refuse
    the credentials or the client refuses their certificate.

    Returns when a broker answered, when Kafka is merely unreachable (services start without
    Kafka and retry later), or after `timeout_s`. Does nothing for PLAINTEXT, which cannot fail
    this way.
    """
    if settings.security_protocol is SecurityProtocol.PLAINTEXT:
        return
    errors: list[KafkaError] = []
    config: dict[str, Any] = {**client_config(settings), "error_cb": errors.append, "log_level": 0}
    admin = AdminClient(config)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if admin.list_topics(timeout=1.0).brokers:
                log.info("Kafka at %s accepts the hub's credentials", settings.bootstrap_servers)
                return
        except KafkaException as exc:
            errors.append(exc.args[0])
        admin.poll(0.1)
        for error in errors:
            if (failure := security_failure(error, settings)) is not None:
                # Logged here too: a server's start failure otherwise shows only a traceback.
                log.error("%s (error %d)", failure.message, int(failure.code))
                raise failure
        if any(e.code() == KafkaError._ALL_BROKERS_DOWN for e in errors):
            log.warning("Kafka at %s is not reachable yet", settings.bootstrap_servers)
            return
    log.warning("Kafka at %s did not answer in %.0f s", settings.bootstrap_servers, timeout_s)


def log_client_error(settings: KafkaSettings) -> Callable[[KafkaError], None]:
    """An `error_cb` for long-lived clients: logs what librdkafka reports, with the setting to
    fix for login and certificate failures."""

    def on_error(error: KafkaError) -> None:
        failure = security_failure(error, settings)
        if failure is not None:
            log.error("%s (error %d)", failure.message, int(failure.code))
        else:
            log.warning("kafka client: %s", error.str())

    return on_error
