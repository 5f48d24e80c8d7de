"""One config file describes the deployment: `HUB_CONFIG_FILE` (or `hub --config`), the
environment winning over it, and `hub config check` printing what it describes."""

import os
from pathlib import Path

import pytest

from hub_core.config_file import InvalidConfigFile, apply_config_file, read_config_file
from tests.support.cli import hub

pytestmark = pytest.mark.unit

CLUSTER = """\
# The production cluster
HUB_KAFKA_BOOTSTRAP_SERVERS=b1.kafka:9093,b2.kafka:9093,b3.kafka:9093
HUB_KAFKA_SECURITY_PROTOCOL=SASL_SSL
HUB_KAFKA_SASL_MECHANISM=SCRAM-SHA-256
HUB_KAFKA_SASL_USERNAME=hub
HUB_KAFKA_SASL_PASSWORD_FILE={password_file}
HUB_KAFKA_REPLICATION_FACTOR=3
HUB_KAFKA_MIN_INSYNC_REPLICAS=2
HUB_REGISTRY_DATABASE_URL="postgresql+psycopg://hub:{db_password}@db.internal:5432/hub"
HUB_LOADER_WAREHOUSE_DIR=s3a://lake/warehouse
HUB_LOADER_CHECKPOINT_DIR=s3a://lake/checkpoints
HUB_LOADER_S3_ENDPOINT=https://s3.internal
HUB_LOADER_MASTER=spark://spark-master:7077
HUB_LOADER_METASTORE_URIS=thrift://metastore:9083
"""


def _write(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def _cluster_file(tmp_path: Path) -> Path:
    password = _write(tmp_path / "kafka-password", "kafka-s3cret\n")
    text = CLUSTER.format(password_file=password, db_password="db-s3cret")
    return _write(tmp_path / "cluster.env", text)


def _clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    return {**env, "HUB_HOME": str(tmp_path / "home"), **extra}


def test_the_file_fills_what_the_environment_does_not_set(tmp_path: Path) -> None:
    environ = {
        "HUB_CONFIG_FILE": str(_cluster_file(tmp_path)),
        "HUB_LOADER_MASTER": "local[2]",  # set by the operator: wins over the file
    }

    used = apply_config_file(environ)

    assert environ["HUB_KAFKA_BOOTSTRAP_SERVERS"] == "b1.kafka:9093,b2.kafka:9093,b3.kafka:9093"
    assert environ["HUB_LOADER_MASTER"] == "local[2]"
    assert "HUB_LOADER_MASTER" not in used
    assert environ["HUB_REGISTRY_DATABASE_URL"].startswith("postgresql+psycopg://hub:db-s3cret@")


def test_no_file_named_changes_nothing() -> None:
    environ = {"HUB_LOADER_MASTER": "local[2]"}
    assert apply_config_file(environ) == {}
    assert environ == {"HUB_LOADER_MASTER": "local[2]"}


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("PATH=/tmp\n", "'PATH' is not a hub setting (HUB_*)"),
        ("HUB_CONFIG_FILE=/etc/other.env\n", "'HUB_CONFIG_FILE' is not a hub setting"),
        ("HUB_LOADER_MASTER\n", "HUB_LOADER_MASTER has no value (write HUB_LOADER_MASTER=...)"),
    ],
)
def test_a_line_that_is_not_a_hub_setting_is_refused(
    tmp_path: Path, text: str, complaint: str
) -> None:
    with pytest.raises(InvalidConfigFile) as caught:
        read_config_file(_write(tmp_path / "bad.env", text))
    assert complaint in caught.value.message
    assert int(caught.value.code) == 42270


def test_secrets_in_a_file_others_can_read_are_refused_without_showing_them(
    tmp_path: Path,
) -> None:
    text = "HUB_LOADER_S3_SECRET_KEY=very-s3cret\nHUB_LOADER_MASTER=local[2]\n"

    with pytest.raises(InvalidConfigFile) as caught:
        read_config_file(_write(tmp_path / "shared.env", text, mode=0o644))

    assert "holds secrets (HUB_LOADER_S3_SECRET_KEY) but others can read it" in str(caught.value)
    assert "very-s3cret" not in str(caught.value)
    secrets = read_config_file(_write(tmp_path / "private.env", text, mode=0o600))
    assert secrets["HUB_LOADER_S3_SECRET_KEY"] == "very-s3cret"


def test_config_check_describes_the_cluster_and_never_shows_a_secret(tmp_path: Path) -> None:
    env = _clean_env(tmp_path, HUB_CONFIG_FILE=str(_cluster_file(tmp_path)))

    result = hub("config", "check", "--all", env=env)

    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Kafka:       b1.kafka:9093,b2.kafka:9093,b3.kafka:9093 over SASL_SSL " in out
    assert "(SCRAM-SHA-256 as hub)" in out
    assert "new feeds: replication 3, min.insync.replicas 2" in out
    assert "Registry:    postgresql+psycopg://hub:***@db.internal:5432/hub" in out
    assert "Tables:      s3a://lake/warehouse" in out
    assert "Checkpoints: s3a://lake/checkpoints (S3 endpoint https://s3.internal)" in out
    assert "Spark:       spark://spark-master:7077" in out
    assert "Metastore:   thrift://metastore:9083" in out
    assert "* HUB_REGISTRY_DATABASE_URL=(set)" in out
    assert "db-s3cret" not in out + result.stderr
    assert "kafka-s3cret" not in out + result.stderr


def test_the_config_option_names_the_file_and_the_environment_still_wins(tmp_path: Path) -> None:
    env = _clean_env(tmp_path, HUB_LOADER_MASTER="local[1]")

    result = hub("--config", str(_cluster_file(tmp_path)), "config", "check", env=env)

    assert result.returncode == 0, result.stderr
    assert "Spark:       local[1]" in result.stdout
    assert "Kafka:       b1.kafka:9093" in result.stdout


@pytest.mark.parametrize(
    ("line", "complaint"),
    [
        ("HUB_KAFKA_REPLICATON_FACTOR=3", "no component reads HUB_KAFKA_REPLICATON_FACTOR"),
        ("HUB_KAFKA_LINGER_MS=-1", "HUB_KAFKA_LINGER_MS: Input should be greater than or equal"),
    ],
    ids=["misspelt", "invalid"],
)
def test_a_misspelt_or_invalid_setting_fails_the_check_with_code_42270(
    tmp_path: Path, line: str, complaint: str
) -> None:
    config = _write(tmp_path / "cluster.env", line + "\n")

    result = hub("config", "check", env=_clean_env(tmp_path, HUB_CONFIG_FILE=str(config)))

    assert result.returncode == 2
    assert complaint in result.stderr
    assert "(error 42270)" in result.stderr


def test_a_missing_file_fails_every_command_at_start(tmp_path: Path) -> None:
    env = _clean_env(tmp_path, HUB_CONFIG_FILE=str(tmp_path / "nowhere.env"))

    result = hub("kafka", "status", env=env)

    assert result.returncode == 2
    assert f"HUB_CONFIG_FILE ({tmp_path / 'nowhere.env'}): no such file" in result.stderr
    assert "Traceback" not in result.stderr
