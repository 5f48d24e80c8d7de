"""Unit-test fixtures: the hub's database as the migrations make it, on a temporary SQLite file.

The migrations run once per session into a template; each test gets its own copy, so a test
sees the real tables and constraints without paying for Alembic every time.
"""

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from hub_core.database import create_database_engine


@pytest.fixture(scope="session")
def migrated_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file with every migration applied; copied, never opened, by tests."""
    from migrations import migrate

    path = tmp_path_factory.mktemp("migrated") / "hub.db"
    migrate.upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture
def hub_engine(migrated_template: Path, tmp_path: Path) -> Iterator[Engine]:
    """An engine on this test's own copy of the migrated hub database (registry and catalog)."""
    path = tmp_path / "hub.db"
    shutil.copyfile(migrated_template, path)
    engine = create_database_engine(f"sqlite:///{path}")
    try:
        yield engine
    finally:
        engine.dispose()
