"""Every error a caller sees is `{"error_code", "message"}` with the code's HTTP status."""

import logging

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from hub_api.errors import REGISTRY_MEDIA_TYPE, Unauthenticated, install_error_handlers
from hub_core.errors import ErrorCode, StoreUnavailable, TerminalError, TransientError
from registry.errors import SubjectNotFound

pytestmark = pytest.mark.unit


@pytest.fixture
def client() -> TestClient:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/subjects/{subject}/versions")
    async def versions(subject: str) -> None:
        raise SubjectNotFound(subject)

    @app.get("/v1/feeds/{topic}")
    async def feed(topic: str) -> None:
        raise TerminalError(f"Feed '{topic}' is parked.", code=ErrorCode.INVALID_FEED)

    @app.get("/v1/down")
    async def down() -> None:
        raise TransientError("Kafka did not answer in time.", code=ErrorCode.KAFKA_UNAVAILABLE)

    @app.get("/v1/store")
    async def store() -> None:
        raise StoreUnavailable("The hub's database is unavailable.")

    @app.get("/v1/me")
    async def me() -> None:
        raise Unauthenticated()

    @app.get("/v1/count")
    async def count(limit: int) -> int:
        return limit

    return TestClient(app, raise_server_exceptions=False)


def test_a_domain_error_is_answered_with_its_code_status_and_message(client: TestClient) -> None:
    answer = client.get("/v1/feeds/sales.orders")

    assert answer.status_code == 422
    assert answer.json() == {"error_code": 42222, "message": "Feed 'sales.orders' is parked."}
    assert answer.headers["content-type"] == "application/json"


def test_registry_paths_answer_errors_with_the_registry_media_type(client: TestClient) -> None:
    answer = client.get("/subjects/orders-value/versions")

    assert answer.status_code == 404
    assert answer.json() == {"error_code": 40401, "message": "Subject 'orders-value' not found."}
    assert answer.headers["content-type"].startswith(REGISTRY_MEDIA_TYPE)


def test_an_unavailable_dependency_answers_503_with_retry_after(client: TestClient) -> None:
    answer = client.get("/v1/down")

    assert answer.status_code == 503
    assert answer.json() == {"error_code": 50301, "message": "Kafka did not answer in time."}
    assert answer.headers["retry-after"] == "5"


def test_a_server_side_failure_is_answered_with_its_code_and_logged(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="hub_api.errors"):
        answer = client.get("/v1/store")

    assert answer.status_code == 500
    assert answer.json()["error_code"] == 50001
    assert "database is unavailable" in caplog.text


def test_a_missing_key_answers_401_with_how_to_authenticate(client: TestClient) -> None:
    answer = client.get("/v1/me")

    assert answer.status_code == 401
    assert answer.json()["error_code"] == 40101
    assert "Authorization: Bearer" in answer.json()["message"]
    assert answer.headers["www-authenticate"] == 'Bearer realm="hub"'


def test_a_malformed_request_names_the_parameter_and_the_problem(client: TestClient) -> None:
    answer = client.get("/v1/count", params={"limit": "many"})

    assert answer.status_code == 400
    body = answer.json()
    assert body["error_code"] == 40001
    assert body["message"].startswith("Malformed request: query.limit:")


def test_an_unknown_path_keeps_its_status_in_the_hubs_error_shape(client: TestClient) -> None:
    answer = client.get("/v1/nowhere")

    assert answer.status_code == 404
    assert answer.json() == {"error_code": 404, "message": "Not Found"}
