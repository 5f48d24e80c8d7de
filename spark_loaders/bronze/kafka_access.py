"""Failing fast, with a coded error, when Kafka refuses the loader's credentials or certificates.

Spark's Kafka source meets a refused login only when the query fetches offsets, and reports it
as a failed query whose cause sits deep in a Java stack trace. Before starting, the loader asks
the brokers once through the same Java client, with the same options (`spark_options`), and
turns a refused SASL login or a failed TLS handshake into `KafkaAuthFailed` / `KafkaTlsFailed`
(ADR 0024). librdkafka is not loaded for this: the loader does not depend on it.
"""

import logging
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from hub_kafka.errors import KafkaAuthFailed, KafkaTlsFailed
from hub_kafka.security import spark_options
from hub_kafka.settings import KafkaSettings, SecurityProtocol

log = logging.getLogger(__name__)

_SASL_REFUSED = "org.apache.kafka.common.errors.SaslAuthenticationException"
_TLS_FAILED = "org.apache.kafka.common.errors.SslAuthenticationException"


def check_kafka_access(spark: SparkSession, kafka: KafkaSettings, *, timeout_s: int = 15) -> None:
    """Ask the brokers for the cluster's nodes with the loader's options; raise the coded error
    when they refuse the login or the TLS handshake fails. An unreachable Kafka only logs a
    warning: the query waits for it as before. Nothing to check for PLAINTEXT."""
    if kafka.security_protocol is SecurityProtocol.PLAINTEXT:
        return
    jvm: Any = spark.sparkContext._jvm
    properties = jvm.java.util.Properties()
    for name, value in spark_options(kafka).items():
        properties.setProperty(name.removeprefix("kafka."), value)
    for bound in ("request.timeout.ms", "default.api.timeout.ms"):
        properties.setProperty(bound, str(timeout_s * 1000))
    admin = jvm.org.apache.kafka.clients.admin.Admin.create(properties)
    try:
        admin.describeCluster().nodes().get(timeout_s, jvm.java.util.concurrent.TimeUnit.SECONDS)
        log.info("Kafka at %s accepts the loader's credentials", kafka.bootstrap_servers)
    except Py4JJavaError as exc:
        cause = _cause_named(exc.java_exception, (_SASL_REFUSED, _TLS_FAILED))
        if cause is None:
            log.warning(
                "Kafka at %s did not answer: %s", kafka.bootstrap_servers, exc.java_exception
            )
            return
        failure = _coded(cause, kafka)
        # Logged here too: `spark-submit` shows a start failure only as a traceback.
        log.error("%s (error %d)", failure.message, int(failure.code))
        raise failure from None
    finally:
        admin.close(jvm.java.time.Duration.ofSeconds(5))


def _coded(cause: Any, kafka: KafkaSettings) -> KafkaAuthFailed | KafkaTlsFailed:
    """The coded error for a Java `SaslAuthenticationException` or `SslAuthenticationException`."""
    detail = str(cause.getMessage())
    if cause.getClass().getName() == _SASL_REFUSED:
        return KafkaAuthFailed(
            kafka.bootstrap_servers,
            mechanism=kafka.sasl_mechanism.value,
            username=kafka.sasl_username or "",
            detail=detail,
        )
    return KafkaTlsFailed(kafka.bootstrap_servers, detail=detail)


def _cause_named(error: Any, names: tuple[str, ...]) -> Any:
    """The first exception in `error`'s cause chain whose class is one of `names`, or None."""
    while error is not None:
        if error.getClass().getName() in names:
            return error
        error = error.getCause()
    return None
