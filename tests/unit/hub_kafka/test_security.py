"""The security settings, and what each Kafka client family is configured with from them."""

import logging
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from pydantic import SecretStr, ValidationError

from hub_core.errors import ErrorCode
from hub_core.settings import invalid_settings_message
from hub_kafka.access import log_client_error, security_failure
from hub_kafka.certificates import TlsFiles, make_certificates
from hub_kafka.security import client_config, jaas_config, spark_options
from hub_kafka.settings import KafkaSettings, SaslMechanism

pytestmark = pytest.mark.unit

PASSWORD = "s3cr3t-Pa55"  # a test value, looked for in every output


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    files = TlsFiles.under(tmp_path_factory.mktemp("tls"))
    make_certificates(files)
    return files


def _sasl_ssl(tls: TlsFiles, **more: object) -> KafkaSettings:
    fields: dict[str, object] = {
        "bootstrap_servers": "kafka-1:9093",
        "security_protocol": "SASL_SSL",
        "sasl_username": "hub",
        "sasl_password": SecretStr(PASSWORD),
        "ssl_ca_location": tls.ca_certificate,
    }
    return KafkaSettings(**(fields | more))  # type: ignore[arg-type]


def test_plaintext_is_the_default_and_adds_nothing_but_the_protocol() -> None:
    settings = KafkaSettings(bootstrap_servers="k:9092")
    assert client_config(settings) == {
        "bootstrap.servers": "k:9092",
        "security.protocol": "PLAINTEXT",
    }
    assert spark_options(settings) == {
        "kafka.bootstrap.servers": "k:9092",
        "kafka.security.protocol": "PLAINTEXT",
    }


def test_sasl_ssl_maps_to_librdkafka_entries(tls: TlsFiles) -> None:
    assert client_config(_sasl_ssl(tls)) == {
        "bootstrap.servers": "kafka-1:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "hub",
        "sasl.password": PASSWORD,
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.ca.location": str(tls.ca_certificate),
    }


def test_sasl_ssl_maps_to_spark_options_with_a_jaas_line_and_a_pem_truststore(
    tls: TlsFiles,
) -> None:
    options = spark_options(_sasl_ssl(tls, sasl_mechanism="SCRAM-SHA-256"))
    assert options == {
        "kafka.bootstrap.servers": "kafka-1:9093",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="hub" password="{PASSWORD}";'
        ),
        "kafka.ssl.endpoint.identification.algorithm": "https",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(tls.ca_certificate),
    }


def test_plain_uses_the_plain_login_module_and_quotes_are_escaped() -> None:
    line = jaas_config(SaslMechanism.PLAIN, 'a"b', 'p\\"q')
    assert line == (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="a\\"b" password="p\\\\\\"q";'
    )


def test_a_client_certificate_goes_to_both_families(tls: TlsFiles, tmp_path: Path) -> None:
    key_password = tmp_path / "key-password"
    key_password.write_text("k3y\n")
    settings = KafkaSettings(
        security_protocol="SSL",
        ssl_ca_location=tls.ca_certificate,
        ssl_certificate_location=tls.certificate,
        ssl_key_location=tls.key,
        ssl_key_password_file=key_password,
        ssl_endpoint_identification="none",
    )
    config = client_config(settings)
    assert config["ssl.certificate.location"] == str(tls.certificate)
    assert config["ssl.key.location"] == str(tls.key)
    assert config["ssl.key.password"] == "k3y"
    assert config["ssl.endpoint.identification.algorithm"] == "none"
    assert "sasl.mechanisms" not in config
    options = spark_options(settings)
    assert options["kafka.ssl.keystore.type"] == "PEM"
    assert options["kafka.ssl.keystore.certificate.chain"] == tls.certificate.read_text()
    assert options["kafka.ssl.keystore.key"] == tls.key.read_text()
    assert options["kafka.ssl.key.password"] == "k3y"
    assert options["kafka.ssl.endpoint.identification.algorithm"] == ""
    assert "kafka.sasl.jaas.config" not in options


def test_the_password_can_come_from_a_file(tls: TlsFiles, tmp_path: Path) -> None:
    path = tmp_path / "password"
    path.write_text(PASSWORD + "\n")
    settings = _sasl_ssl(tls, sasl_password=None, sasl_password_file=path)
    assert client_config(settings)["sasl.password"] == PASSWORD


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"security_protocol": "SASL_SSL", "sasl_password": "x"}, "HUB_KAFKA_SASL_USERNAME"),
        (
            {"security_protocol": "SASL_PLAINTEXT", "sasl_username": "hub"},
            "HUB_KAFKA_SASL_PASSWORD",
        ),
        ({"ssl_ca_location": "/etc/hosts"}, "HUB_KAFKA_SECURITY_PROTOCOL"),
        (
            {"security_protocol": "SSL", "ssl_certificate_location": "/etc/hosts"},
            "SSL_KEY_LOCATION",
        ),
        ({"security_protocol": "SSL", "ssl_ca_location": "/nowhere/ca.pem"}, "/nowhere/ca.pem"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI"}, "SASL_MECHANISM"),
    ],
)
def test_incomplete_or_unknown_settings_are_refused_naming_the_setting(
    fields: dict[str, str], named: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        KafkaSettings(**fields)  # type: ignore[arg-type]
    message = invalid_settings_message(caught.value)
    assert message is not None and named in message


def test_settings_from_the_environment_never_show_the_password(
    tls: TlsFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HUB_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("HUB_KAFKA_SASL_USERNAME", "hub")
    monkeypatch.setenv("HUB_KAFKA_SASL_PASSWORD", PASSWORD)
    monkeypatch.setenv("HUB_KAFKA_SSL_KEY_PASSWORD", PASSWORD)
    monkeypatch.setenv("HUB_KAFKA_SSL_CA_LOCATION", str(tls.ca_certificate))
    settings = KafkaSettings()
    assert client_config(settings)["sasl.password"] == PASSWORD
    for shown in (repr(settings), str(settings), settings.model_dump_json()):
        assert PASSWORD not in shown


def test_refused_logins_and_handshakes_get_coded_errors_without_the_secret(
    tls: TlsFiles, caplog: pytest.LogCaptureFixture
) -> None:
    settings = _sasl_ssl(tls)
    refused = KafkaError(
        KafkaError._AUTHENTICATION, "SASL authentication error: invalid credentials"
    )
    untrusted = KafkaError(KafkaError._SSL, "SSL handshake failed: certificate verify failed")
    auth, handshake = security_failure(refused, settings), security_failure(untrusted, settings)
    assert auth is not None and auth.code is ErrorCode.KAFKA_AUTH_FAILED
    assert "HUB_KAFKA_SASL_PASSWORD" in auth.message and PASSWORD not in auth.message
    assert handshake is not None and handshake.code is ErrorCode.KAFKA_TLS_FAILED
    assert "HUB_KAFKA_SSL_CA_LOCATION" in handshake.message
    assert security_failure(KafkaError(KafkaError._TRANSPORT, "refused"), settings) is None
    with caplog.at_level(logging.WARNING, logger="hub_kafka.access"):
        log_client_error(settings)(refused)
    assert "50021" in caplog.text and PASSWORD not in caplog.text
