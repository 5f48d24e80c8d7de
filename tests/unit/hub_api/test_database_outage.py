"""A database outage is answered 503 with `Retry-After` and a documented code, and the database
driver's message (host names, ports, users) stays in the server's log."""

import logging

import pytest
from fastapi.testclient import TestClient

from hub_api.app import create_app
from hub_api.settings import ApiSettings, AuthMode
from hub_core.errors import ErrorCode
from hub_kafka.settings import KafkaSettings
from registry.settings import RegistrySettings
from tests.support.ports import free_port

pytestmark = pytest.mark.unit


def test_a_database_outage_answers_503_with_retry_after_and_no_driver_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = free_port()  # nothing listens on it: the connection is refused
    url = f"postgresql+psycopg2://hub:hunter2@127.0.0.1:{port}/hubdb"
    app = create_app(
        ApiSettings(auth=AuthMode.DISABLED),
        RegistrySettings(database_url=url),
        # Never contacted: listing feeds reads only the database.
        KafkaSettings(bootstrap_servers=f"127.0.0.1:{free_port()}"),
    )
    with (
        caplog.at_level(logging.WARNING, logger="hub_core.database"),
        TestClient(app, raise_server_exceptions=False) as client,
    ):
        answer = client.get("/v1/feeds")

    assert answer.status_code == 503
    assert answer.headers["retry-after"] == "5"
    body = answer.json()
    assert body["error_code"] == ErrorCode.DATABASE_UNAVAILABLE == 50303
    assert "HUB_REGISTRY_DATABASE_URL" in body["message"]
    for leaked in ("127.0.0.1", str(port), "hubdb", "hunter2", "refused", "connection to server"):
        assert leaked not in answer.text
    # The operator still gets the driver's message.
    assert str(port) in caplog.text
