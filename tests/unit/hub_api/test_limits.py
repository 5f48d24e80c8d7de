"""Bodies over the size limit are refused with 413 before they are read into memory."""

from collections.abc import Iterator

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from hub_api.limits import BodySizeLimit

pytestmark = pytest.mark.unit

LIMIT = 1024


@pytest.fixture
def client() -> TestClient:
    app = FastAPI()
    app.add_middleware(BodySizeLimit, max_bytes=LIMIT)

    @app.post("/v1/echo")
    async def echo(request: Request) -> dict[str, int]:
        return {"bytes": len(await request.body())}

    return TestClient(app)


def _chunks(total: int, size: int = 256) -> Iterator[bytes]:
    for start in range(0, total, size):
        yield b"x" * min(size, total - start)


def test_a_body_within_the_limit_reaches_the_route(client: TestClient) -> None:
    answer = client.post("/v1/echo", content=b"x" * LIMIT)

    assert answer.status_code == 200
    assert answer.json() == {"bytes": LIMIT}


def test_a_declared_length_over_the_limit_is_refused_naming_the_setting(
    client: TestClient,
) -> None:
    answer = client.post("/v1/echo", content=b"x" * (LIMIT + 1))

    assert answer.status_code == 413
    body = answer.json()
    assert body["error_code"] == 41301
    assert f"larger than {LIMIT} bytes" in body["message"]
    assert "HUB_API_MAX_BODY_BYTES" in body["message"]


def test_a_streamed_body_without_a_length_is_refused_once_it_passes_the_limit(
    client: TestClient,
) -> None:
    answer = client.post("/v1/echo", content=_chunks(LIMIT * 4))

    assert answer.status_code == 413
    assert answer.json()["error_code"] == 41301


def test_a_streamed_body_within_the_limit_reaches_the_route(client: TestClient) -> None:
    answer = client.post("/v1/echo", content=_chunks(LIMIT - 10))

    assert answer.status_code == 200
    assert answer.json() == {"bytes": LIMIT - 10}
