"""With `HUB_API_PUBLIC_READS=false`, every read of the API needs a key: each `GET` of the served
OpenAPI document answers anonymous callers 401 (40101) and a team's key as usual. (The document
itself describes the API, not the hub's data, and stays readable.)"""

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.security.conftest import Hub, running_hub

pytestmark = pytest.mark.security

# Probes and metrics stay open to the platform that runs the hub (docs/security.md).
OPEN = frozenset({"/healthz", "/readyz", "/metrics"})
# Reads that need query parameters to be a question at all: asked about nothing landed (404).
QUERIES = {
    "/v1/lineage/rows": "?table=bronze.nothing_here&partition=0&offset=0",
    "/v1/lineage/positions": "?lsn=0",
}


@pytest.fixture(scope="module")
def private_hub(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    database = f"sqlite:///{tmp_path_factory.mktemp('private') / 'hub.db'}"
    with running_hub(database_url=database, bootstrap=kafka_bootstrap, public_reads=False) as hub:
        yield hub


def _reads(hub: Hub) -> list[str]:
    """Every GET path of the served document, its parameters naming team sec_b's things."""
    document: dict[str, Any] = httpx.get(
        f"{hub.url}/openapi.json", headers=hub.headers("sec_a"), timeout=30
    ).json()
    team = hub.teams["sec_b"]
    names = {
        "subject": team.value_subject,
        "topic": team.topic,
        "version": "1",
        "schema_id": "1",
        "name": "nothing",
    }
    paths = []
    for path, operations in document["paths"].items():
        if "get" in operations and path not in OPEN:
            query = QUERIES.get(path, "")
            for name, value in names.items():
                path = path.replace(f"{{{name}}}", value)
            paths.append(path + query)
    return paths


def test_every_read_needs_a_key_when_public_reads_are_off(private_hub: Hub) -> None:
    paths = _reads(private_hub)
    assert len(paths) > 20  # the whole API, not a part of it

    for path in paths:
        anonymous = private_hub.call("anonymous", "GET", path)
        assert (anonymous.status_code, anonymous.json().get("error_code")) == (401, 40101), path
        with_key = private_hub.call("sec_a", "GET", path)
        assert with_key.status_code in (200, 404), (path, with_key.text)
