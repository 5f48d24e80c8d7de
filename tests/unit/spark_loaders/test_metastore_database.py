"""How a process reaches a PostgreSQL metastore database from Python, from the settings alone."""

from pathlib import Path

import pytest

from hub_core.errors import ErrorCode
from spark_loaders.errors import MetastoreError
from spark_loaders.services.metastore_database import (
    connection_parameters,
    schema_creation,
    uses_postgresql,
)
from spark_loaders.settings import LoaderSettings

pytestmark = pytest.mark.unit


def test_the_jdbc_url_becomes_libpq_parameters_with_the_settings_credentials() -> None:
    settings = LoaderSettings(
        metastore_url="jdbc:postgresql://db.internal:6432/hive?sslmode=verify-full&tcpKeepAlive=true",
        metastore_user="hive",
        metastore_password="s3cret",
    )

    parameters = connection_parameters(settings)

    assert parameters == {
        "host": "db.internal",
        "port": "6432",
        "dbname": "hive",
        "user": "hive",
        "password": "s3cret",
        "sslmode": "verify-full",  # libpq's meaning too; tcpKeepAlive is pgjdbc's alone
        "connect_timeout": "10",
    }


def test_parameters_in_the_url_win_and_several_hosts_are_kept() -> None:
    settings = LoaderSettings(
        metastore_url="jdbc:postgresql://a,b:5433/hive?user=owner&password=p&currentSchema=ms",
        metastore_user="hive",
    )

    parameters = connection_parameters(settings)

    assert (parameters["host"], parameters["port"]) == ("a,b", "5432,5433")
    assert (parameters["user"], parameters["password"]) == ("owner", "p")
    assert parameters["options"] == "-c search_path=ms"


def test_a_url_without_a_host_is_refused_with_the_expected_form() -> None:
    settings = LoaderSettings(metastore_url="jdbc:postgresql:hive")

    with pytest.raises(MetastoreError) as raised:
        connection_parameters(settings)

    assert raised.value.code == ErrorCode.LOCAL_SERVICE_FAILED
    assert "jdbc:postgresql://host[:port]/database" in raised.value.message


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"metastore_url": "jdbc:derby://127.0.0.1:1527/metastore_db"},
        {"metastore_url": "jdbc:postgresql://db/hive", "metastore_uris": "thrift://ms:9083"},
    ],
    ids=["local-derby", "derby-url", "metastore-service"],
)
def test_other_metastores_are_not_touched_before_spark_starts(
    tmp_path: Path, values: dict[str, str]
) -> None:
    settings = LoaderSettings(metastore_dir=tmp_path, **values)  # type: ignore[arg-type]

    with schema_creation(settings, where="here") as must_create:
        assert must_create is False
    assert not uses_postgresql(settings)
