"""The loader's registry client retries what a retry can fix, and nothing else."""

import json
import time
from collections.abc import Callable

import httpx
import pytest

from hub_core.errors import ErrorCode
from hub_core.retries import Backoff
from registry.types import SchemaId
from spark_loaders.bronze.schemas import RegistryClient
from spark_loaders.errors import LoaderError, RegistryUnavailable

pytestmark = pytest.mark.unit

QUICK = Backoff(initial_s=0.01, max_s=0.02, jitter_s=0.01, attempts=4, timeout_s=10.0)
SCHEMA = json.dumps({"type": "record", "name": "Click", "fields": [{"name": "n", "type": "long"}]})
FOUND = httpx.Response(200, json={"schema": SCHEMA})

Answer = httpx.Response | Exception


def _client(answers: list[Answer]) -> tuple[RegistryClient, list[float]]:
    """A client whose requests get `answers` in turn (the last one repeats); the times asked."""
    asked: list[float] = []

    def handle(request: httpx.Request) -> httpx.Response:
        asked.append(time.monotonic())
        answer = answers[min(len(asked), len(answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    client = RegistryClient(
        "http://registry.test", backoff=QUICK, transport=httpx.MockTransport(handle)
    )
    return client, asked


def _connection_refused() -> Exception:
    return httpx.ConnectError("connection refused")


@pytest.mark.parametrize(
    "failure",
    [
        _connection_refused,
        lambda: httpx.ReadTimeout("no answer"),
        lambda: httpx.Response(500, json={"error_code": 50001, "message": "database away"}),
        lambda: httpx.Response(503, json={"error_code": 50301, "message": "overloaded"}),
        lambda: httpx.Response(429, text="slow down"),
    ],
)
def test_transient_failures_are_retried_until_the_registry_answers(
    failure: Callable[[], Answer],
) -> None:
    client, asked = _client([failure(), failure(), FOUND])

    assert client.schema(SchemaId(7)) == SCHEMA
    assert len(asked) == 3


def test_a_503_with_retry_after_is_not_asked_again_sooner() -> None:
    busy = httpx.Response(503, headers={"Retry-After": "1"}, json={"message": "busy"})
    client, asked = _client([busy, FOUND])

    assert client.schema(SchemaId(7)) == SCHEMA
    assert asked[1] - asked[0] >= 1.0


def test_a_registry_that_stays_away_is_reported_unavailable_after_bounded_attempts() -> None:
    client, asked = _client([_connection_refused()])

    with pytest.raises(RegistryUnavailable, match="unreachable") as raised:
        client.latest("web.clicks-value")
    assert raised.value.code is ErrorCode.REGISTRY_UNAVAILABLE
    assert len(asked) == QUICK.attempts


def test_a_compatibility_check_is_retried_too() -> None:
    verdict = httpx.Response(200, json={"is_compatible": True, "messages": []})
    client, asked = _client([httpx.Response(502, text="bad gateway"), verdict])

    assert client.check("web.clicks-value", SCHEMA).compatible
    assert len(asked) == 2


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (httpx.Response(401, json={"message": "key needed"}), LoaderError),
        (httpx.Response(422, json={"message": "bad"}), httpx.HTTPStatusError),
    ],
)
def test_refusals_are_raised_at_once(answer: httpx.Response, error: type[Exception]) -> None:
    client, asked = _client([answer])

    with pytest.raises(error):
        client.schema(SchemaId(7))
    assert len(asked) == 1


def test_an_unknown_schema_is_an_answer_not_a_failure() -> None:
    client, asked = _client([httpx.Response(404, json={"error_code": 40403})])

    assert client.schema(SchemaId(7)) is None
    assert len(asked) == 1
