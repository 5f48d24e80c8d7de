"""Which metastore a Spark process connects to, from the settings alone."""

from pathlib import Path

import pyspark
import pytest

from hub_core.errors import ErrorCode
from spark_loaders.errors import MetastoreError
from spark_loaders.services.metastore import (
    DERBY_CLIENT_DRIVER,
    MetastoreKind,
    describe,
    metastore_kind,
    spark_conf,
)
from spark_loaders.settings import LoaderSettings
from tests.conftest import JARS, REPO

pytestmark = pytest.mark.unit

URL_KEY = "spark.hadoop.javax.jdo.option.ConnectionURL"
DRIVER_KEY = "spark.hadoop.javax.jdo.option.ConnectionDriverName"


def _settings(tmp_path: Path, **values: object) -> LoaderSettings:
    jars = tmp_path / "jars"
    jars.mkdir(exist_ok=True)
    (jars / "derbyclient-10.16.1.1.jar").touch()
    (jars / "postgresql-42.7.8.jar").touch()
    return LoaderSettings(metastore_dir=tmp_path / "ms", metastore_jars_dir=jars, **values)  # type: ignore[arg-type]


def test_the_default_is_the_local_derby_server_through_its_client_driver(tmp_path: Path) -> None:
    settings = _settings(tmp_path, metastore_port=15999)

    conf = spark_conf(settings)

    assert metastore_kind(settings) is MetastoreKind.LOCAL_SERVER
    assert conf[URL_KEY] == "jdbc:derby://127.0.0.1:15999/metastore_db;create=true"
    assert conf[DRIVER_KEY] == DERBY_CLIENT_DRIVER
    assert conf["spark.driver.extraClassPath"] == str(
        tmp_path / "jars" / "derbyclient-10.16.1.1.jar"
    )


def test_a_missing_derby_client_jar_names_make_jars(tmp_path: Path) -> None:
    settings = LoaderSettings(metastore_jars_dir=tmp_path / "empty")

    with pytest.raises(MetastoreError) as raised:
        spark_conf(settings)

    assert raised.value.code == ErrorCode.LOCAL_SERVICE_FAILED
    assert "make jars" in raised.value.message
    assert "HUB_LOADER_METASTORE_JARS_DIR" in raised.value.message


def test_a_metastore_service_takes_precedence_over_a_database_url(tmp_path: Path) -> None:
    settings = _settings(
        tmp_path,
        metastore_uris="thrift://metastore.internal:9083",
        metastore_url="jdbc:postgresql://db/metastore",
    )

    assert metastore_kind(settings) is MetastoreKind.SERVICE
    assert spark_conf(settings) == {
        "spark.hadoop.hive.metastore.uris": "thrift://metastore.internal:9083"
    }


def test_a_postgresql_metastore_gets_its_driver_and_credentials(tmp_path: Path) -> None:
    settings = _settings(
        tmp_path,
        metastore_url="jdbc:postgresql://db:5432/metastore?password=hunter2",
        metastore_user="hive",
        metastore_password="s3cret",
    )

    conf = spark_conf(settings)

    assert metastore_kind(settings) is MetastoreKind.DATABASE
    assert conf[DRIVER_KEY] == "org.postgresql.Driver"
    assert conf["spark.hadoop.javax.jdo.option.ConnectionUserName"] == "hive"
    assert conf["spark.hadoop.javax.jdo.option.ConnectionPassword"] == "s3cret"
    # Hive's DataNucleus finds the driver on the JVM's class path only, and makes the schema.
    assert conf["spark.driver.extraClassPath"] == str(tmp_path / "jars" / "postgresql-42.7.8.jar")
    assert conf["spark.hadoop.datanucleus.schema.autoCreateAll"] == "true"
    assert conf["spark.hadoop.hive.metastore.schema.verification"] == "false"
    assert "hunter2" not in describe(settings)
    assert "s3cret" not in describe(settings)


def test_an_unknown_jdbc_url_asks_for_the_driver_class(tmp_path: Path) -> None:
    settings = _settings(tmp_path, metastore_url="jdbc:oracle:thin:@db:1521/hive")

    with pytest.raises(MetastoreError) as raised:
        spark_conf(settings)

    assert "HUB_LOADER_METASTORE_DRIVER" in raised.value.message
    explicit = _settings(
        tmp_path,
        metastore_url="jdbc:oracle:thin:@db:1521/hive",
        metastore_driver="oracle.jdbc.OracleDriver",
    )
    assert spark_conf(explicit)[DRIVER_KEY] == "oracle.jdbc.OracleDriver"


def test_the_derby_server_matches_the_derby_of_pyspark() -> None:
    """Spark's Derby driver front (derbytools) and our client must be one release."""
    bundled = {p.name for p in (Path(pyspark.__file__).parent / "jars").glob("derby-*.jar")}
    pom = (REPO / "jvm" / "metastore" / "pom.xml").read_text()
    version = pom.split("<derby.version>", 1)[1].split("</derby.version>", 1)[0]

    assert bundled == {f"derby-{version}.jar"}
    assert (JARS / "metastore" / f"derbyclient-{version}.jar").exists(), "run `make jars`"


def test_a_missing_postgresql_driver_jar_names_make_jars(tmp_path: Path) -> None:
    settings = LoaderSettings(
        metastore_url="jdbc:postgresql://db/metastore", metastore_jars_dir=tmp_path / "empty"
    )

    with pytest.raises(MetastoreError) as raised:
        spark_conf(settings)

    assert "postgresql-*.jar" in raised.value.message
    assert "make jars" in raised.value.message


def test_make_jars_fetches_the_postgresql_driver() -> None:
    pom = (REPO / "jvm" / "metastore" / "pom.xml").read_text()
    version = pom.split("<postgresql.version>", 1)[1].split("</postgresql.version>", 1)[0]

    assert version.startswith("42.7.")
    assert (JARS / "metastore" / f"postgresql-{version}.jar").exists(), "run `make jars`"
