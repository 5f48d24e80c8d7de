"""Clients of the hub API for the registry rules tests (test_registry_rules_*.py)."""

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.api_server import serve_api
from tests.support.hub_client import bearer, create_key


@pytest.fixture
def http(api_url: str, admin_key: str) -> Iterator[httpx.Client]:
    """An admin client of the session's API server."""
    with httpx.Client(base_url=api_url, headers=bearer(admin_key), timeout=30) as client:
        yield client


@pytest.fixture
def own_http(kafka_bootstrap: str, tmp_path: Path) -> Iterator[httpx.Client]:
    """A client of an API server of the test's own, on a fresh SQLite file."""
    database = f"sqlite:///{tmp_path / 'hub.db'}"
    with serve_api(database_url=database, bootstrap_servers=kafka_bootstrap) as url:
        key = create_key(database, team=None)
        with httpx.Client(base_url=url, headers=bearer(key), timeout=30) as client:
            yield client
