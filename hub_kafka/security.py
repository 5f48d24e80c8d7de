"""One set of security settings, mapped to both Kafka client families the hub runs (ADR 0024).

The API, the connectors and the CLI talk to Kafka through librdkafka (confluent-kafka); the
loader talks through Spark's Kafka source, which is the Java client. The two spell the same
things differently (`sasl.mechanisms` vs `sasl.mechanism` + a JAAS line, a CA file vs a PEM
truststore), so the mapping lives here once and every client takes its configuration from it.

Pure functions of the settings: no Kafka client is imported here, so the loader (which must
not load librdkafka) uses the same module as everyone else.
"""

from typing import Any

from hub_kafka.settings import KafkaSettings, SaslMechanism

# The Java login module of each SASL mechanism (Kafka's classes).
_LOGIN_MODULES = {
    SaslMechanism.SCRAM_SHA_512: "org.apache.kafka.common.security.scram.ScramLoginModule",
    SaslMechanism.SCRAM_SHA_256: "org.apache.kafka.common.security.scram.ScramLoginModule",
    SaslMechanism.PLAIN: "org.apache.kafka.common.security.plain.PlainLoginModule",
}


def client_config(settings: KafkaSettings) -> dict[str, Any]:
    """librdkafka configuration: `bootstrap.servers` and every security entry the settings ask
    for. Callers add their own entries (group id, acks, callbacks) to it."""
    config: dict[str, Any] = {
        "bootstrap.servers": settings.bootstrap_servers,
        "security.protocol": settings.security_protocol.value,
    }
    if settings.security_protocol.uses_sasl:
        config["sasl.mechanisms"] = settings.sasl_mechanism.value
        config["sasl.username"] = settings.sasl_username
        config["sasl.password"] = settings.sasl_password_value()
    if settings.security_protocol.uses_tls:
        config["ssl.endpoint.identification.algorithm"] = settings.ssl_endpoint_identification.value
        if settings.ssl_ca_location is not None:
            config["ssl.ca.location"] = str(settings.ssl_ca_location)
        if settings.ssl_certificate_location is not None:
            config["ssl.certificate.location"] = str(settings.ssl_certificate_location)
            config["ssl.key.location"] = str(settings.ssl_key_location)
            if (key_password := settings.ssl_key_password_value()) is not None:
                config["ssl.key.password"] = key_password
    return config


def spark_options(settings: KafkaSettings) -> dict[str, str]:
    """Options of Spark's Kafka source and sink (`kafka.`-prefixed Java client settings) for
    the same connection as `client_config`.

    Certificates stay PEM: Java clients read PEM truststores and keystores since Kafka 2.7, so
    no JKS file is ever made. The client certificate and key go inline (`ssl.keystore.
    certificate.chain`, `ssl.keystore.key`), as Kafka's PEM keystore takes them from two files.
    """
    protocol = settings.security_protocol
    options = {
        "kafka.bootstrap.servers": settings.bootstrap_servers,
        "kafka.security.protocol": protocol.value,
    }
    if protocol.uses_sasl:
        options["kafka.sasl.mechanism"] = settings.sasl_mechanism.value
        options["kafka.sasl.jaas.config"] = jaas_config(
            settings.sasl_mechanism, settings.sasl_username or "", settings.sasl_password_value()
        )
    if protocol.uses_tls:
        algorithm = settings.ssl_endpoint_identification.value
        # The Java client turns the check off with an empty value, librdkafka with "none".
        options["kafka.ssl.endpoint.identification.algorithm"] = (
            "" if algorithm == "none" else algorithm
        )
        if settings.ssl_ca_location is not None:
            options["kafka.ssl.truststore.type"] = "PEM"
            options["kafka.ssl.truststore.location"] = str(settings.ssl_ca_location)
        if settings.ssl_certificate_location is not None and settings.ssl_key_location:
            options["kafka.ssl.keystore.type"] = "PEM"
            options["kafka.ssl.keystore.certificate.chain"] = (
                settings.ssl_certificate_location.read_text()
            )
            options["kafka.ssl.keystore.key"] = settings.ssl_key_location.read_text()
            if (key_password := settings.ssl_key_password_value()) is not None:
                options["kafka.ssl.key.password"] = key_password
    return options


def jaas_config(mechanism: SaslMechanism, username: str, password: str | None) -> str:
    """The Java client's `sasl.jaas.config` line; quotes and backslashes are escaped, as Kafka
    reads the values as quoted strings."""
    return (
        f'{_LOGIN_MODULES[mechanism]} required username="{_quoted(username)}" '
        f'password="{_quoted(password or "")}";'
    )


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def client_environment(settings: KafkaSettings) -> dict[str, str]:
    """The `HUB_KAFKA_*` variables that give a child process the same connection as `settings`,
    except the secrets themselves: a child that needs a password inherits its variable (see
    `hub_core.environment`), or reads the file named here."""
    fields = {
        "bootstrap_servers": settings.bootstrap_servers,
        "security_protocol": settings.security_protocol.value,
        "sasl_mechanism": settings.sasl_mechanism.value,
        "sasl_username": settings.sasl_username,
        "sasl_password_file": settings.sasl_password_file,
        "ssl_ca_location": settings.ssl_ca_location,
        "ssl_certificate_location": settings.ssl_certificate_location,
        "ssl_key_location": settings.ssl_key_location,
        "ssl_key_password_file": settings.ssl_key_password_file,
        "ssl_endpoint_identification": settings.ssl_endpoint_identification.value,
    }
    return {f"HUB_KAFKA_{name.upper()}": str(value) for name, value in fields.items() if value}
