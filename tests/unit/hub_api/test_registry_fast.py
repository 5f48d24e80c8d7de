"""Cached registry reads answer only what the route would: not to a caller it would refuse."""

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from catalog.types import Principal
from hub_api.auth import PRINCIPAL_SCOPE_KEY
from hub_api.registry_fast import CachedRegistryReads
from hub_api.settings import ApiSettings, AuthMode
from registry.types import SchemaId, StoredSchema

pytestmark = pytest.mark.unit


class _Registry:
    def cached_stored_schema(self, *, schema_id: SchemaId) -> StoredSchema | None:
        return StoredSchema(schema_id=schema_id, schema='"string"')


def _get(path: str, *, public_reads: bool, principal: Principal | None = None) -> tuple[int, str]:
    """(status, who answered) of `GET path` through the middleware."""
    state = SimpleNamespace(
        registry=_Registry(),
        api_settings=ApiSettings(auth=AuthMode.REQUIRED, public_reads=public_reads),
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
