"""Every Spark session the hub builds leaves SQL text as written (no `${...}` substitution),
shows no Kafka secret of a secured loader, and reads local tables' logs with the hub's store."""

import re
from pathlib import Path

import pytest
from pydantic import SecretStr

from hub_kafka.certificates import TlsFiles, make_certificates
from hub_kafka.security import spark_options
from hub_kafka.settings import KafkaSettings
from spark_loaders.errors import LoaderError
from spark_loaders.services.analyst import thrift_conf
from spark_loaders.services.analyst_settings import AnalystSettings
from spark_loaders.services.session import SAFE_CONF, build_session, session_conf
from spark_loaders.settings import LoaderSettings

pytestmark = pytest.mark.unit

SUBSTITUTE = "spark.sql.variable.substitute"


def _settings(tmp_path: Path) -> LoaderSettings:
    return LoaderSettings(metastore_uris="thrift://metastore:9083", warehouse_dir=tmp_path)


def test_the_loader_and_hub_sql_sessions_do_not_substitute_variables(tmp_path: Path) -> None:
    conf = session_conf(_settings(tmp_path), jars=[tmp_path / "delta-spark.jar"])

    assert conf[SUBSTITUTE] == "false"


def test_the_thrift_server_session_does_not_substitute_variables(tmp_path: Path) -> None:
    settings = _settings(tmp_path).model_copy(update={"jars_dir": tmp_path})
    (tmp_path / "hub-thrift-auth-0.1.0.jar").touch()
    extra = thrift_conf(AnalystSettings(), settings)
    conf = session_conf(settings, jars=[], extra_conf=extra)

    assert extra[SUBSTITUTE] == "false" and conf[SUBSTITUTE] == "false"
    assert extra["spark.hadoop.hive.variable.substitute"] == "false"


def test_extra_settings_cannot_turn_substitution_back_on(tmp_path: Path) -> None:
    conf = session_conf(_settings(tmp_path), jars=[], extra_conf={SUBSTITUTE: "true"})

    assert conf[SUBSTITUTE] == "false"
    assert SAFE_CONF == {SUBSTITUTE: "false"}


def test_spark_redacts_every_secret_a_secured_loader_passes_in_its_kafka_options(
    tmp_path: Path,
) -> None:
    files = TlsFiles.under(tmp_path)
    make_certificates(files)
    kafka = KafkaSettings(
        security_protocol="SASL_SSL",
        sasl_username="hub",
        sasl_password=SecretStr("pw"),
        ssl_ca_location=files.ca_certificate,
        ssl_certificate_location=files.certificate,
        ssl_key_location=files.key,
        ssl_key_password=SecretStr("kp"),
    )
    conf = session_conf(_settings(tmp_path), jars=[])
    # Spark redacts an entry when its name or its value matches (Java's find, as re.search).
    pattern = re.compile(conf["spark.redaction.regex"])

    secret = {"kafka.sasl.jaas.config", "kafka.ssl.keystore.key", "kafka.ssl.key.password"}
    redacted = {
        name
        for name, value in spark_options(kafka).items()
        if pattern.search(name) or pattern.search(value)
    }
    assert secret <= redacted
    assert "kafka.bootstrap.servers" not in redacted


def test_a_tables_log_is_listed_from_the_checkpoint_on_local_and_s3a_paths(tmp_path: Path) -> None:
    conf = session_conf(_settings(tmp_path), jars=[])

    assert conf["spark.delta.logStore.file.impl"] == "org.integrationhub.delta.NameFirstLogStore"
    # Only for file: paths; s3a:// tables keep Delta's own store for S3, listing from a name.
    assert not any(key.startswith("spark.delta.logStore.s3") for key in conf)
    assert conf["spark.hadoop.delta.enableFastS3AListFrom"] == "true"


def test_without_the_log_store_jar_a_session_says_to_run_make_jars(tmp_path: Path) -> None:
    (tmp_path / "delta-spark_2.13-4.0.0.jar").touch()
    settings = _settings(tmp_path).model_copy(update={"jars_dir": tmp_path})

    with pytest.raises(LoaderError, match=r"hub-delta-log-store-\*\.jar.*Run `make jars`"):
        build_session(settings)


def test_spark_keeps_as_many_generated_classes_as_the_setting_says(tmp_path: Path) -> None:
    default = session_conf(_settings(tmp_path), jars=[])
    settings = _settings(tmp_path).model_copy(update={"codegen_cache_entries": 4000})

    assert default["spark.sql.codegen.cache.maxEntries"] == "1000"
    assert session_conf(settings, jars=[])["spark.sql.codegen.cache.maxEntries"] == "4000"
