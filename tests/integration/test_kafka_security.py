"""A wrong Kafka password or an untrusted broker certificate stops the API, a connector or the
loader at start with a coded error naming the setting to fix, never the secret."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr
from pyspark.sql import SparkSession

from connectors.settings import ConnectSettings
from connectors.worker import connect_services
from hub_core.errors import ErrorCode
from hub_kafka.certificates import TlsFiles, make_certificates
from hub_kafka.errors import KafkaAuthFailed, KafkaTlsFailed
from hub_kafka.security import client_environment
from hub_kafka.settings import KafkaSettings
from registry.settings import RegistrySettings
from spark_loaders.bronze.loader import BronzeLoader
from spark_loaders.settings import LoaderSettings
from tests.conftest import REPO
from tests.support.ports import free_port

pytestmark = pytest.mark.integration

WRONG = "not-the-password-4711"  # looked for in every output


def _wrong_password(kafka: KafkaSettings) -> KafkaSettings:
    return kafka.model_copy(update={"sasl_password": SecretStr(WRONG), "sasl_password_file": None})


def _other_ca(kafka: KafkaSettings, folder: Path) -> KafkaSettings:
    """The settings with the CA file of a CA that did not sign the broker's certificate."""
    other = TlsFiles.under(folder)
    make_certificates(other, common_name="Some other CA")
    return kafka.model_copy(update={"ssl_ca_location": other.ca_certificate})


def test_the_api_stops_at_start_when_kafka_refuses_its_password(
    secured_kafka: KafkaSettings, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        **client_environment(secured_kafka),
        "HUB_HOME": str(tmp_path),
        "HUB_API_HOST": "127.0.0.1",
        "HUB_API_PORT": str(free_port()),
        "HUB_REGISTRY_DATABASE_URL": f"sqlite:///{tmp_path / 'hub.db'}",
        "HUB_KAFKA_SASL_PASSWORD": WRONG,
    }
    del env["HUB_KAFKA_SASL_PASSWORD_FILE"]
    result = subprocess.run(
        [sys.executable, "-m", "hub_cli.main", "api", "serve"],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,  # a guard: it ends on its own once Kafka refused the login
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert f"(error {int(ErrorCode.KAFKA_AUTH_FAILED)})" in output
    assert "HUB_KAFKA_SASL_PASSWORD" in output
    assert WRONG not in output


def test_a_connector_stops_at_start_when_kafka_refuses_its_password(
    secured_kafka: KafkaSettings, tmp_path: Path
) -> None:
    with pytest.raises(KafkaAuthFailed) as refused:
        connect_services(
            RegistrySettings(database_url=f"sqlite:///{tmp_path / 'hub.db'}"),
            _wrong_password(secured_kafka),
            ConnectSettings(),
        )
    assert refused.value.code is ErrorCode.KAFKA_AUTH_FAILED
    assert WRONG not in refused.value.message


def test_a_connector_stops_at_start_when_the_broker_certificate_is_not_trusted(
    secured_kafka: KafkaSettings, tmp_path: Path
) -> None:
    with pytest.raises(KafkaTlsFailed) as untrusted:
        connect_services(
            RegistrySettings(database_url=f"sqlite:///{tmp_path / 'hub.db'}"),
            _other_ca(secured_kafka, tmp_path / "other-ca"),
            ConnectSettings(),
        )
    assert untrusted.value.code is ErrorCode.KAFKA_TLS_FAILED
    assert "HUB_KAFKA_SSL_CA_LOCATION" in untrusted.value.message


def test_the_loader_stops_at_start_when_kafka_refuses_its_password_or_certificate(
    secured_kafka: KafkaSettings,
    spark: SparkSession,
    loader_settings: LoaderSettings,
    tmp_path: Path,
) -> None:
    settings = loader_settings.model_copy(update={"checkpoint_dir": tmp_path / "checkpoints"})
    with pytest.raises(KafkaAuthFailed) as refused:
        BronzeLoader(spark, settings, _wrong_password(secured_kafka)).start()
    assert "HUB_KAFKA_SASL_PASSWORD" in refused.value.message
    assert WRONG not in refused.value.message
    with pytest.raises(KafkaTlsFailed) as untrusted:
        BronzeLoader(spark, settings, _other_ca(secured_kafka, tmp_path / "other-ca")).start()
    assert "HUB_KAFKA_SSL_CA_LOCATION" in untrusted.value.message
