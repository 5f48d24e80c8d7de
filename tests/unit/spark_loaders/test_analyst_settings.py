"""Where the Thrift server listens, how it checks logins, and the URL analysts connect with."""

from pathlib import Path

import pytest

from hub_core.errors import ErrorCode
from spark_loaders.errors import AnalystAuthRequired, LoaderError
from spark_loaders.services.analyst import (
    AUTHENTICATOR_CLASS,
    READ_ONLY_EXTENSION,
    authenticator_properties,
    require_safe_exposure,
    thrift_conf,
)
from spark_loaders.services.analyst_settings import AnalystAuth, AnalystSettings
from spark_loaders.services.session import session_conf
from spark_loaders.settings import LoaderSettings
from tests.support.cli import hub

pytestmark = pytest.mark.unit


def test_the_thrift_server_binds_to_loopback_on_the_hiveserver2_port_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HUB_ANALYST_HOST", raising=False)
    monkeypatch.delenv("HUB_ANALYST_PORT", raising=False)

    settings = AnalystSettings()

    assert (settings.host, settings.port) == ("127.0.0.1", 10000)
    assert settings.jdbc_url == "jdbc:hive2://127.0.0.1:10000/default"


def test_the_environment_moves_the_server_and_its_jdbc_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HUB_ANALYST_HOST", "10.0.0.5")
    monkeypatch.setenv("HUB_ANALYST_PORT", "10001")

    assert AnalystSettings().jdbc_url == "jdbc:hive2://10.0.0.5:10001/default"


def _loader(tmp_path: Path, *, with_authenticator: bool = True) -> LoaderSettings:
    """Loader settings on an external metastore, with the jars folder `make jars` fills."""
    if with_authenticator:
        (tmp_path / "hub-thrift-auth-0.1.0.jar").touch()
    return LoaderSettings(metastore_uris="thrift://metastore:9083", jars_dir=tmp_path)


def test_logins_need_a_hub_api_key_by_default_even_on_loopback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("HUB_ANALYST_AUTH", raising=False)
    monkeypatch.setenv("HUB_ANALYST_API_URL", "http://hub-api:8080")

    settings = AnalystSettings()
    conf = thrift_conf(settings, _loader(tmp_path))

    assert settings.auth is AnalystAuth.HUB_KEYS
    assert conf["spark.hadoop.hive.server2.authentication"] == "CUSTOM"
    # On the JVM's own class path, where every HiveServer2 worker thread finds it.
    assert conf["spark.driver.extraClassPath"] == str(tmp_path / "hub-thrift-auth-0.1.0.jar")
    # The provider's class only: its own settings are given once, not kept where a session
    # could change them (HubKeyAuthenticator.configure).
    assert authenticator_properties(settings) == {
        "hive.server2.custom.authentication.class": AUTHENTICATOR_CLASS,
    }


def test_each_statement_is_bounded_in_time_and_result_size(tmp_path: Path) -> None:
    settings = AnalystSettings(statement_timeout_seconds=45, max_result_mb=64)

    conf = thrift_conf(settings, _loader(tmp_path))

    assert conf["spark.sql.thriftServer.queryTimeout"] == "45s"
    assert conf["spark.sql.thriftServer.interruptOnCancel"] == "true"
    assert conf["spark.driver.maxResultSize"] == "64m"


def test_the_authenticator_joins_the_metastore_client_on_the_class_path(tmp_path: Path) -> None:
    (tmp_path / "derbyclient-10.16.1.1.jar").touch()
    loader = _loader(tmp_path).model_copy(
        update={"metastore_uris": None, "metastore_jars_dir": tmp_path}
    )

    class_path = thrift_conf(AnalystSettings(), loader)["spark.driver.extraClassPath"]

    assert class_path.split(":") == [
        str(tmp_path / "derbyclient-10.16.1.1.jar"),
        str(tmp_path / "hub-thrift-auth-0.1.0.jar"),
    ]


def test_without_the_authenticator_jar_the_server_says_to_run_make_jars(tmp_path: Path) -> None:
    with pytest.raises(LoaderError, match=r"hub-thrift-auth-\*\.jar.*Run `make jars`"):
        thrift_conf(AnalystSettings(), _loader(tmp_path, with_authenticator=False))


def test_without_authentication_the_server_may_bind_to_loopback_only(tmp_path: Path) -> None:
    local = AnalystSettings(host="127.0.0.1", auth=AnalystAuth.NONE)

    require_safe_exposure(local)  # allowed: only this machine reaches it
    conf = thrift_conf(local, _loader(tmp_path))
    assert conf["spark.hadoop.hive.server2.authentication"] == "NONE"
    assert authenticator_properties(local) == {}


@pytest.mark.parametrize("auth", list(AnalystAuth))
def test_the_thrift_server_session_is_read_only_whatever_the_login(
    auth: AnalystAuth, tmp_path: Path
) -> None:
    conf = thrift_conf(AnalystSettings(auth=auth), _loader(tmp_path))

    # After Delta's extension, so Delta's statements are checked as the commands they become.
    assert conf["spark.sql.extensions"] == (
        f"io.delta.sql.DeltaSparkSessionExtension,{READ_ONLY_EXTENSION}"
    )
    assert conf["spark.driver.extraClassPath"] == str(tmp_path / "hub-thrift-auth-0.1.0.jar")


def test_the_loader_and_hub_sql_sessions_stay_writable(tmp_path: Path) -> None:
    conf = session_conf(_loader(tmp_path), jars=[tmp_path / "delta-spark.jar"])

    assert READ_ONLY_EXTENSION not in conf["spark.sql.extensions"]


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.5", "analysts.example.com"])
def test_a_server_beyond_loopback_without_authentication_is_refused(host: str) -> None:
    with pytest.raises(AnalystAuthRequired) as refused:
        require_safe_exposure(AnalystSettings(host=host, auth=AnalystAuth.NONE))

    assert refused.value.code == ErrorCode.ANALYST_AUTH_REQUIRED
    assert host in refused.value.message
    assert "HUB_ANALYST_AUTH=hub-keys" in refused.value.message


def test_hub_analyst_serve_refuses_to_start_beyond_loopback_without_authentication(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HUB_ANALYST_AUTH", "none")

    result = hub("analyst", "serve", "--host", "0.0.0.0")

    assert result.returncode == 2
    assert "error 42271" in result.stderr
    assert "HUB_ANALYST_AUTH=hub-keys" in result.stderr
    # Refused before Spark started: nothing was served.
    assert "starting Spark" not in result.stderr


def test_queries_read_the_latest_commit_unless_a_staleness_is_allowed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    limit = "spark.databricks.delta.stalenessLimit"
    assert limit not in thrift_conf(AnalystSettings(), _loader(tmp_path))

    monkeypatch.setenv("HUB_ANALYST_SNAPSHOT_STALENESS_SECONDS", "2.5")

    assert thrift_conf(AnalystSettings(), _loader(tmp_path))[limit] == "2500ms"
