"""Tables and checkpoints on object storage: `s3a://` locations, the S3A settings Spark gets,
where the loader's local state goes, and no secret where Spark would show it."""

import re
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from spark_loaders.runtime.storage import RemoteLocation
from spark_loaders.services.session import session_conf
from spark_loaders.settings import LoaderSettings

pytestmark = pytest.mark.unit

S3 = {
    "warehouse_dir": "s3a://tables/warehouse/",
    "checkpoint_dir": "s3a://tables/checkpoints",
    "s3_endpoint": "http://127.0.0.1:7070",
    "s3_access_key": "hubkey",
    "s3_secret_key": SecretStr("s3cr3t-value"),
    "s3_path_style_access": True,
    "s3_region": "us-east-1",
}


def _s3_settings(tmp_path: Path) -> LoaderSettings:
    return LoaderSettings(metastore_uris="thrift://metastore:9083",
                          local_state_dir=tmp_path / "state", **S3)  # fmt: skip


def test_local_paths_stay_paths_and_keep_their_state_beside_the_checkpoints(
    tmp_path: Path,
) -> None:
    settings = LoaderSettings(warehouse_dir=str(tmp_path / "w"), checkpoint_dir=tmp_path / "c")

    assert settings.warehouse_dir == tmp_path / "w"
    assert isinstance(settings.warehouse_dir, Path)
    assert settings.state_dir == tmp_path / "c"
    assert not settings.uses_object_storage
    assert not any(k.startswith("spark.hadoop.fs.s3a.") for k in settings.spark_s3_conf())


def test_s3a_uris_are_remote_locations_and_state_stays_on_local_disk(tmp_path: Path) -> None:
    settings = _s3_settings(tmp_path)

    assert settings.warehouse_dir == RemoteLocation("s3a://tables/warehouse")
    assert str(settings.checkpoint_dir / "hub-bronze") == "s3a://tables/checkpoints/hub-bronze"
    assert (settings.checkpoint_dir / "hub-bronze").parent == settings.checkpoint_dir
    assert settings.state_dir == tmp_path / "state"
    assert settings.uses_object_storage


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("s3://tables/warehouse", "s3:// is not supported"),
        ("gs://tables/warehouse", "gs:// is not supported"),
        ("s3a:///warehouse", "names no bucket"),
    ],
)
def test_an_unusable_location_is_refused_naming_the_fix(value: str, says: str) -> None:
    with pytest.raises(ValidationError, match=says) as failure:
        LoaderSettings(warehouse_dir=value)
    assert "s3a://bucket/path" in str(failure.value)


def test_half_a_key_pair_is_refused() -> None:
    with pytest.raises(ValidationError, match="HUB_LOADER_S3_ACCESS_KEY and"):
        LoaderSettings(s3_access_key="hubkey")


def test_spark_gets_the_s3a_settings_of_a_local_server(tmp_path: Path) -> None:
    conf = session_conf(_s3_settings(tmp_path), jars=[])

    assert conf["spark.sql.warehouse.dir"] == "s3a://tables/warehouse"
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:7070"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "us-east-1"
    assert conf["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith(
        "SimpleAWSCredentialsProvider"
    )
    assert conf["spark.hadoop.fs.s3a.secret.key"] == "s3cr3t-value"


def test_the_secret_key_may_come_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("from-a-file\n")
    settings = LoaderSettings(s3_access_key="hubkey", s3_secret_key_file=secret)

    assert settings.spark_s3_conf()["spark.hadoop.fs.s3a.secret.key"] == "from-a-file"


def test_spark_redacts_the_s3_keys_and_the_settings_never_show_the_secret(
    tmp_path: Path,
) -> None:
    settings = _s3_settings(tmp_path)
    conf = session_conf(settings, jars=[])
    pattern = re.compile(conf["spark.redaction.regex"])

    shown = {name for name in conf if not pattern.search(name)}
    assert "spark.hadoop.fs.s3a.secret.key" not in shown
    assert "spark.hadoop.fs.s3a.access.key" not in shown
    assert "spark.hadoop.fs.s3a.endpoint" in shown
    assert "s3cr3t-value" not in repr(settings) and "s3cr3t-value" not in str(settings)
