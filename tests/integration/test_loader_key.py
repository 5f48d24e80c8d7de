"""The loader's key reads what the loader reads, on a hub without public reads, and changes
nothing: every write it sends is refused 403 (40301) and leaves the registry and feeds as
they were (docs/adr/0060-a-loader-key-that-only-reads.md)."""

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from catalog.teams import TeamStore
from hub_core.database import create_database_engine
from registry.types import SchemaId
from spark_loaders.bronze.schemas import RegistryClient
from tests.support.api_server import serve_api
from tests.support.hub_client import bearer, create_feed, create_key, unique_topic
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

TEAM = "ledger"
TRANSFER = {
    "type": "record",
    "name": "Transfer",
    "namespace": "ledger",
    "fields": [{"name": "id", "type": "string"}, {"name": "cents", "type": "long"}],
}
# Compatible with TRANSFER, so that only the key's role can refuse it.
TRANSFER_V2 = {
    **TRANSFER,
    "fields": [*TRANSFER["fields"], {"name": "note", "type": ["null", "string"], "default": None}],
}


@dataclass(frozen=True)
class Hub:
    url: str
    topic: str
    schema_id: int
    loader_key: str
    team_key: str


@pytest.fixture(scope="module")
def hub(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    """An API server of its own with public reads off, a team's feed, and a loader key."""
    database = f"sqlite:///{tmp_path_factory.mktemp('loader-key') / 'hub.db'}"
    api = {"public_reads": False}
    with serve_api(database_url=database, bootstrap_servers=kafka_bootstrap, api=api) as url:
        team_key = create_key(database, team=TEAM)
        engine = create_database_engine(database)
        try:
            _key, loader_key = TeamStore(engine).create_key(team=None, loader=True)
        finally:
            engine.dispose()
        topic = unique_topic(TEAM)
        create_feed(url, team_key, topic=topic, schema=TRANSFER, owner=TEAM)
        # A new topic's end offsets show once Kafka's metadata has it; the writes below compare
        # them before and after.
        wait_until(
            lambda: _feed(url, team_key, topic)["end_offsets"] == {"0": 0},
            timeout_s=60,
            what=f"the end offsets of {topic}",
        )
        latest = httpx.get(
            f"{url}/subjects/{topic}-value/versions/latest", headers=bearer(team_key)
        ).json()
        yield Hub(url, topic, latest["id"], loader_key, team_key)


def test_the_loaders_key_reads_what_the_loader_reads_where_reads_need_a_key(hub: Hub) -> None:
    subject = f"{hub.topic}-value"
    registry = RegistryClient(hub.url, api_key=hub.loader_key)
    try:
        assert json.loads(registry.schema(SchemaId(hub.schema_id)) or "null") == TRANSFER
        latest = registry.latest(subject)
        assert latest is not None and latest.schema_id == hub.schema_id
        assert set(registry.writers(subject)) == {hub.schema_id}
        assert registry.check(subject, json.dumps(TRANSFER_V2)).compatible
    finally:
        registry.close()
    with httpx.Client(base_url=hub.url, headers=bearer(hub.loader_key), timeout=30) as http:
        assert subject in http.get("/subjects").json()  # silver finds changelog topics here
        feeds = http.get("/v1/feeds").json()
    assert hub.topic in json.dumps(feeds)
    # Without a key the same reads are refused: the key, not public reads, let them through.
    assert httpx.get(f"{hub.url}/subjects").status_code == 401


def _writes(topic: str) -> dict[str, tuple[str, str, Any]]:
    """A write of each kind a key may send, aimed at the team's feed and its subject."""
    subject = f"{topic}-value"
    new_feed = {"topic": f"{TEAM}.new", "owner": TEAM, "kind": "event",
                "value_schema": json.dumps(TRANSFER)}  # fmt: skip
    return {
        "create-feed": ("POST", "/v1/feeds", new_feed),
        "register-schema": ("POST", f"/subjects/{subject}/versions",
                            {"schema": json.dumps(TRANSFER_V2)}),
        "global-config": ("PUT", "/config", {"compatibility": "NONE"}),
        "subject-config": ("PUT", f"/config/{subject}", {"compatibility": "NONE"}),
        "subject-mode": ("PUT", f"/mode/{subject}", {"mode": "READONLY"}),
        "delete-subject": ("DELETE", f"/subjects/{subject}", None),
        "publish": ("POST", f"/v1/feeds/{topic}/records",
                    {"records": [{"value": {"id": "t1", "cents": 5}}]}),
        "change-feed": ("PATCH", f"/v1/feeds/{topic}", {"description": "taken over"}),
        "delete-feed": ("DELETE", f"/v1/feeds/{topic}", None),
    }  # fmt: skip


@pytest.mark.parametrize("write", list(_writes("any.topic")))
def test_the_loaders_key_is_refused_every_write_and_changes_nothing(hub: Hub, write: str) -> None:
    method, path, body = _writes(hub.topic)[write]
    with httpx.Client(base_url=hub.url, headers=bearer(hub.team_key), timeout=30) as owner:
        before = _state(owner, hub.topic)

        refused = httpx.request(
            method,
            f"{hub.url}{path}",
            headers={**bearer(hub.loader_key), "Content-Type": "application/json"},
            content=json.dumps(body) if body is not None else None,
            timeout=30,
        )

        assert refused.status_code == 403, refused.text
        assert refused.json()["error_code"] == 40301
        assert _state(owner, hub.topic) == before


def _feed(url: str, key: str, topic: str) -> Any:
    return httpx.get(f"{url}/v1/feeds/{topic}", headers=bearer(key), timeout=30).json()


def _state(owner: httpx.Client, topic: str) -> dict[str, Any]:
    """What a write could change: the feed, its subject's versions, configuration and mode,
    the registry's global configuration and the list of feeds."""
    subject = f"{topic}-value"
    return {
        "feed": owner.get(f"/v1/feeds/{topic}").json(),
        "versions": owner.get(f"/subjects/{subject}/versions").json(),
        "config": owner.get(f"/config/{subject}", params={"defaultToGlobal": "true"}).json(),
        "mode": owner.get(f"/mode/{subject}", params={"defaultToGlobal": "true"}).json(),
        "global": owner.get("/config").json(),
        "feeds": owner.get("/v1/feeds").json(),
    }


def test_the_loaders_key_is_held_to_the_admin_keys_rate_not_a_teams(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The loader asks for every feed's schemas when it starts; a team's rate would hold it
    back where the admin key it used before never was (HUB_API_ADMIN_RATE_LIMIT_PER_SECOND)."""
    database = f"sqlite:///{tmp_path / 'hub.db'}"
    api = {"rate_limit_per_second": 0.01, "rate_limit_burst": 2}
    with serve_api(database_url=database, bootstrap_servers=kafka_bootstrap, api=api) as url:
        team_key = create_key(database, team=TEAM)
        engine = create_database_engine(database)
        try:
            _key, loader_key = TeamStore(engine).create_key(team=None, loader=True)
        finally:
            engine.dispose()

        def answers(key: str) -> list[int]:
            return [httpx.get(f"{url}/subjects", headers=bearer(key)).status_code for _ in range(5)]

        assert answers(team_key)[2:] == [429, 429, 429]
        assert answers(loader_key) == [200] * 5
