"""Cached registry reads answer only what the route would: not to a caller it would refuse."""

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from catalog.types import Principal
from hub_api.auth import PRINCIPAL_SCOPE_KEY
from hub_api.registry.fast_reads import CachedRegistryReads, GenerationPerTurn
from hub_api.settings import ApiSettings, AuthMode
from registry.types import SchemaId, StoredSchema
from tests.unit.hub_api.app_services import app_services

pytestmark = pytest.mark.unit


class _Registry:
    def generation(self) -> int:
        return 1

    def cached_stored_schema(
        self, *, schema_id: SchemaId, generation: int | None
    ) -> StoredSchema | None:
        return StoredSchema(schema_id=schema_id, schema='"string"')


def _get(path: str, *, public_reads: bool, principal: Principal | None = None) -> tuple[int, str]:
    """(status, who answered) of `GET path` through the middleware."""
    state = SimpleNamespace(
        services=app_services(
            registry=_Registry(),
            settings=ApiSettings(auth=AuthMode.REQUIRED, public_reads=public_reads),
        )
    )
    scope: dict[str, Any] = {
        "type": "http",
        "method": "GET",
        "path": path,
        "query_string": b"",
        "headers": [],
        "app": SimpleNamespace(state=state, router=SimpleNamespace(routes=[])),
    }
    if principal is not None:
        scope[PRINCIPAL_SCOPE_KEY] = principal
    sent: list[dict[str, Any]] = []
    routed: list[str] = []

    async def route(_scope: Any, _receive: Any, _send: Any) -> None:
        routed.append(path)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(CachedRegistryReads(route)(scope, receive, send))
    if routed:
        return 0, "route"
    return sent[0]["status"], "cache"


def test_a_cached_schema_is_answered_to_anyone_when_reads_are_public() -> None:
    assert _get("/schemas/ids/7", public_reads=True) == (200, "cache")


def test_without_public_reads_a_caller_without_a_key_goes_to_the_route_which_refuses() -> None:
    assert _get("/schemas/ids/7", public_reads=False) == (0, "route")
    reader = Principal(key_id="k", team=None, admin=False)
    assert _get("/schemas/ids/7", public_reads=False, principal=reader) == (200, "cache")


@pytest.mark.parametrize("tail", ["007", "-1", "7a", "99999999999", "7/schema"])
def test_ids_the_route_must_parse_or_refuse_go_to_the_route(tail: str) -> None:
    assert _get(f"/schemas/ids/{tail}", public_reads=True) == (0, "route")


def test_the_generation_is_read_once_a_turn_and_afresh_for_what_arrives_after_the_read() -> None:
    reads = iter([1, 2])
    registry = SimpleNamespace(generation=lambda: next(reads))
    per_turn = GenerationPerTurn()

    async def scenario() -> tuple[int | None, ...]:
        first = per_turn.now(registry)
        same_turn = per_turn.now(registry)
        # What is scheduled after the read (a request read from its socket later) runs after
        # the read is forgotten, and reads again.
        later: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(lambda: later.set_result(per_turn.now(registry)))
        return first, same_turn, await later

    assert asyncio.run(scenario()) == (1, 1, 2)


def _lookup_routed(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the route receives of a lookup the cache cannot answer, sent as `messages`."""
    state = SimpleNamespace(
        services=app_services(
            registry=SimpleNamespace(generation=lambda: 1, cached_lookup=lambda **_: None),
            settings=ApiSettings(auth=AuthMode.DISABLED),
        )
    )
    scope: dict[str, Any] = {
        "type": "http",
        "method": "POST",
        "path": "/subjects/orders-value",
        "query_string": b"",
        "headers": [(b"content-type", b"application/vnd.schemaregistry.v1+json")],
        "app": SimpleNamespace(state=state),
    }
    incoming = iter(messages)
    received: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return next(incoming, {"type": "http.disconnect"})

    async def route(_scope: Any, route_receive: Any, _send: Any) -> None:
        while not received or received[-1].get("more_body"):
            received.append(await route_receive())

    async def send(_message: dict[str, Any]) -> None:
        raise AssertionError("the cache answered")

    asyncio.run(CachedRegistryReads(route)(scope, receive, send))
    return received


def test_a_lookup_the_cache_cannot_answer_reaches_the_route_with_its_whole_body() -> None:
    body = b'{"schema": "\\"string\\""}'
    routed = _lookup_routed(
        [
            {"type": "http.request", "body": body[:10], "more_body": True},
            {"type": "http.request", "body": body[10:], "more_body": False},
        ]
    )
    assert routed == [{"type": "http.request", "body": body, "more_body": False}]


def test_a_client_gone_mid_body_reaches_the_route_as_a_disconnect() -> None:
    routed = _lookup_routed([{"type": "http.request", "body": b'{"sch', "more_body": True}])
    assert routed == [
        {"type": "http.request", "body": b'{"sch', "more_body": True},
        {"type": "http.disconnect"},
    ]
