"""The console's session store on each database the hub runs on (SQLite and PostgreSQL): what
one worker registers another finds, sessions end by lifetime, idleness, revocation and
deletion, and ended rows are purged in bounded batches."""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine

from catalog.sessions import SessionStore
from catalog.teams import TeamStore
from catalog.types import Principal, TeamName
from hub_core.database import create_database_engine
from migrations import migrate

pytestmark = pytest.mark.integration

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
LIFETIME, IDLE = timedelta(hours=8), timedelta(minutes=30)


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    migrate.upgrade(database_url)
    engine = create_database_engine(database_url)
    try:
        yield engine
    finally:
        engine.dispose()


def _principal(teams: TeamStore) -> Principal:
    key, _token = teams.create_key(team=TeamName("shop"))
    return Principal(key.key_id, TeamName("shop"), False)


def test_sessions_end_by_lifetime_idleness_revocation_and_deletion_on_either_database(
    engine: Engine,
) -> None:
    teams = TeamStore(engine)
    teams.register(name=TeamName("shop"))
    principal = _principal(teams)
    worker, other_worker = (SessionStore(engine, lifetime=LIFETIME, idle_timeout=IDLE)
                            for _ in range(2))  # fmt: skip
    lives, idles, signs_out = (worker.register(principal=principal, now=T0)[0] for _ in range(3))
    revoked_principal = _principal(teams)
    revoked, _ = worker.register(principal=revoked_principal, now=T0)

    for moment in (T0 + IDLE / 2, T0 + IDLE, T0 + 3 * IDLE / 2):
        assert other_worker.get(session_id=lives, now=moment) is not None
    assert other_worker.get(session_id=idles, now=T0 + 2 * IDLE) is None
    assert other_worker.delete(session_id=signs_out) is True
    teams.revoke(key_id=revoked_principal.key_id)
    assert other_worker.get(session_id=revoked, now=T0) is None

    assert [s.principal for s in worker.list()] == [principal]
    assert worker.get(session_id=lives, now=T0 + LIFETIME) is None
    assert worker.list() == []


def test_a_sign_in_purges_a_bounded_batch_of_ended_sessions_on_either_database(
    engine: Engine,
) -> None:
    teams = TeamStore(engine)
    teams.register(name=TeamName("shop"))
    principal = _principal(teams)
    short = SessionStore(engine, lifetime=timedelta(minutes=1), idle_timeout=IDLE)
    for _ in range(5):
        short.register(principal=principal, now=T0)
    store = SessionStore(engine, lifetime=LIFETIME, idle_timeout=IDLE, purge_batch=3)

    store.register(principal=principal, now=T0 + timedelta(minutes=2))

    assert len(store.list()) == 5 - 3 + 1
