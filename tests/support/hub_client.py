"""Small helpers for tests that talk to the hub's API."""

import contextlib
import json
import uuid
from typing import Any

import httpx

from catalog.errors import TeamExists
from catalog.teams import TeamStore
from catalog.types import TeamName
from hub_core.database import create_database_engine


def create_key(database_url: str, *, team: str | None) -> str:
    """A new API key of `team` (created if missing), or an admin key when `team` is None."""
    engine = create_database_engine(database_url)
    try:
        teams = TeamStore(engine)
        if team is not None:
            with contextlib.suppress(TeamExists):
                teams.register(name=TeamName(team))
        _key, token = teams.create_key(team=TeamName(team) if team else None, admin=team is None)
        return token
    finally:
        engine.dispose()


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def unique_topic(domain: str) -> str:
    """A topic name no other test uses: `<domain>.t<random>`."""
    return f"{domain}.t{uuid.uuid4().hex[:10]}"


def create_feed(
    api_url: str, key: str, *, topic: str, schema: dict[str, Any] | str, owner: str,
    kind: str = "event", **extra: Any,
) -> dict[str, Any]:  # fmt: skip
    """Create a feed through the API and return its description."""
    response = httpx.post(
        f"{api_url}/v1/feeds",
        headers=bearer(key),
        json={
            "topic": topic,
            "owner": owner,
            "kind": kind,
            "value_schema": schema if isinstance(schema, str) else json.dumps(schema),
            **extra,
        },
        timeout=60,
    )
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def publish(
    api_url: str, key: str, topic: str, records: list[dict[str, Any]], **params: Any
) -> httpx.Response:
    """POST records to a feed and return the raw response."""
    return httpx.post(
        f"{api_url}/v1/feeds/{topic}/records",
        headers=bearer(key),
        params=params,
        json={"records": records},
        timeout=120,
    )
