"""Console sessions in the hub's database: a random id stored only as its hash, standing for a
key until it expires, goes unused too long, its key is revoked, or it is deleted."""

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, text

from catalog.sessions import SessionStore
from catalog.teams import TeamStore
from catalog.types import Principal, TeamName

pytestmark = pytest.mark.unit

SHOP = TeamName("shop")
LIFETIME = timedelta(hours=8)
IDLE = timedelta(minutes=30)
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def teams(hub_engine: Engine) -> TeamStore:
    store = TeamStore(hub_engine)
    store.register(name=SHOP)
    return store


@pytest.fixture
def principal(teams: TeamStore) -> Principal:
    key, _token = teams.create_key(team=SHOP)
    return Principal(key_id=key.key_id, team=SHOP, admin=False)


def _store(engine: Engine, *, purge_batch: int = 100) -> SessionStore:
    return SessionStore(engine, lifetime=LIFETIME, idle_timeout=IDLE, purge_batch=purge_batch)


def _stored_ids(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return [row[0] for row in conn.execute(text("SELECT id_sha256 FROM console_sessions"))]


def test_a_new_session_has_a_random_id_of_256_bits_stored_only_as_its_hash(
    hub_engine: Engine, principal: Principal
) -> None:
    store = _store(hub_engine)

    session_id, session = store.register(principal=principal, now=T0)
    other_id, _ = store.register(principal=principal, now=T0)

    assert len(session_id) == 43 and session_id != other_id  # 32 random bytes, base64url
    assert sorted(_stored_ids(hub_engine)) == sorted(
        hashlib.sha256(i.encode()).hexdigest() for i in (session_id, other_id)
    )
    with hub_engine.connect() as conn:
        dump = " ".join(str(v) for row in conn.execute(text("SELECT * FROM console_sessions"))
                        for v in row)  # fmt: skip
    assert session_id not in dump and other_id not in dump
    assert session.principal == principal
    assert (session.created_at, session.expires_at) == (T0, T0 + LIFETIME)


def test_a_session_stands_for_its_key_and_an_unknown_id_for_nobody(
    hub_engine: Engine, principal: Principal
) -> None:
    store = _store(hub_engine)
    session_id, _ = store.register(principal=principal, now=T0)

    found = store.get(session_id=session_id, now=T0 + timedelta(minutes=1))

    assert found is not None and found.principal == principal
    assert store.get(session_id="x" * 43, now=T0) is None
    assert store.get(session_id="", now=T0) is None
    assert store.get(session_id=session_id + "x" * 200, now=T0) is None


def test_a_session_past_its_lifetime_is_refused_and_deleted_even_while_in_use(
    hub_engine: Engine, principal: Principal
) -> None:
    store = _store(hub_engine)
    session_id, _ = store.register(principal=principal, now=T0)
    moment = T0
    while moment + IDLE / 2 < T0 + LIFETIME:  # used every quarter of an hour all day
        moment += IDLE / 2
        assert store.get(session_id=session_id, now=moment) is not None

    assert store.get(session_id=session_id, now=T0 + LIFETIME) is None
    assert _stored_ids(hub_engine) == []


def test_a_session_unused_for_the_idle_timeout_is_refused_and_deleted(
    hub_engine: Engine, principal: Principal
) -> None:
    store = _store(hub_engine)
    session_id, _ = store.register(principal=principal, now=T0)
    used = T0 + timedelta(minutes=20)
    assert store.get(session_id=session_id, now=used) is not None  # renews its idle time

    assert store.get(session_id=session_id, now=used + IDLE - timedelta(seconds=1)) is not None
    assert store.get(session_id=session_id, now=used + 2 * IDLE) is None
    assert _stored_ids(hub_engine) == []


def test_a_session_of_a_revoked_key_is_refused_and_deleted(
    hub_engine: Engine, teams: TeamStore, principal: Principal
) -> None:
    store = _store(hub_engine)
    session_id, _ = store.register(principal=principal, now=T0)

    teams.revoke(key_id=principal.key_id)

    assert store.get(session_id=session_id, now=T0) is None
    assert _stored_ids(hub_engine) == []


def test_a_deleted_session_is_gone_and_deleting_it_again_finds_nothing(
    hub_engine: Engine, principal: Principal
) -> None:
    store = _store(hub_engine)
    session_id, _ = store.register(principal=principal, now=T0)
    kept_id, _ = store.register(principal=principal, now=T0)

    assert store.delete(session_id=session_id) is True

    assert store.get(session_id=session_id, now=T0) is None
    assert store.delete(session_id=session_id) is False
    assert store.get(session_id=kept_id, now=T0) is not None
    assert len(store.list(key_id=principal.key_id)) == 1


def test_each_sign_in_deletes_a_bounded_batch_of_ended_sessions(
    hub_engine: Engine, teams: TeamStore, principal: Principal
) -> None:
    short = SessionStore(hub_engine, lifetime=timedelta(minutes=1), idle_timeout=IDLE)
    for _ in range(3):
        short.register(principal=principal, now=T0)  # past their lifetime below
    revoked_key, _token = teams.create_key(team=SHOP)
    store = _store(hub_engine, purge_batch=2)
    store.register(principal=Principal(revoked_key.key_id, SHOP, False), now=T0)
    teams.revoke(key_id=revoked_key.key_id)
    later = T0 + timedelta(minutes=2)

    store.register(principal=principal, now=later)
    assert len(store.list()) == 4 - 2 + 1
    store.register(principal=principal, now=later)
    store.register(principal=principal, now=later)

    live = store.list()
    assert [s.created_at for s in live] == [later] * 3  # the ended four are gone, none other
