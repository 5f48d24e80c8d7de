"""Where the Thrift server listens, and the URL analysts are told to connect with."""

import pytest

from spark_loaders.analyst_settings import AnalystSettings

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
