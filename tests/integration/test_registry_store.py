"""The registry's storage contract, run against SQLite and PostgreSQL alike."""

import json
import threading
from collections.abc import Iterator

import pytest

from hub_core.database import create_database_engine
from migrations import migrate
from registry.errors import SchemaNotFound, SubjectNotFound, VersionNotFound
from registry.service import RegistryService
from registry.store import SchemaStore
from registry.types import SchemaId, Subject, Version

pytestmark = pytest.mark.integration


def _schema(name: str, *fields: str) -> str:
    """A record whose fields all have defaults, so adding or removing one stays compatible."""
    return json.dumps(
        {
            "type": "record",
            "name": name,
            "fields": [{"name": f, "type": "string", "default": ""} for f in fields],
        }
    )


@pytest.fixture
def registry(database_url: str) -> Iterator[RegistryService]:
    migrate.upgrade(database_url)
    engine = create_database_engine(database_url)
    yield RegistryService(SchemaStore(engine))
    engine.dispose()


def test_migrations_create_the_registry_tables(database_url: str) -> None:
    migrate.upgrade(database_url)
    assert {"schemas", "subject_versions", "alembic_version"} <= migrate.current_tables(
        database_url
    )


def test_migrations_are_idempotent(database_url: str) -> None:
    migrate.upgrade(database_url)
    migrate.upgrade(database_url)
    assert "schemas" in migrate.current_tables(database_url)


def test_versions_count_up_and_latest_is_the_newest(registry: RegistryService) -> None:
    subject = Subject("sales.orders-value")
    first = registry.register(subject=subject, schema_text=_schema("Order", "id"))
    second = registry.register(subject=subject, schema_text=_schema("Order", "id", "note"))
    assert (first.version, second.version) == (1, 2)
    assert second.schema_id != first.schema_id
    assert registry.version(subject=subject, version=None).schema_id == second.schema_id
    assert registry.version(subject=subject, version=Version(1)).schema_id == first.schema_id


def test_registering_the_same_schema_again_returns_the_existing_version(
    registry: RegistryService,
) -> None:
    subject = Subject("a.b-value")
    first = registry.register(subject=subject, schema_text=_schema("X", "id"))
    again = registry.register(
        subject=subject, schema_text=json.dumps(json.loads(_schema("X", "id")), indent=2)
    )
    assert again == first


def test_one_schema_under_two_subjects_has_one_id(registry: RegistryService) -> None:
    a = registry.register(subject=Subject("a.one-value"), schema_text=_schema("Same", "id"))
    b = registry.register(subject=Subject("a.two-value"), schema_text=_schema("Same", "id"))
    assert a.schema_id == b.schema_id
    assert (a.version, b.version) == (1, 1)
    assert registry.subjects() == ["a.one-value", "a.two-value"]


def test_schemas_resolve_by_id(registry: RegistryService) -> None:
    registered = registry.register(subject=Subject("a.b-value"), schema_text=_schema("Y", "id"))
    assert registry.schema(schema_id=registered.schema_id).json["name"] == "Y"


def test_unknown_things_raise_their_own_errors(registry: RegistryService) -> None:
    registry.register(subject=Subject("a.b-value"), schema_text=_schema("Z", "id"))
    with pytest.raises(SubjectNotFound):
        registry.version(subject=Subject("nope-value"), version=None)
    with pytest.raises(VersionNotFound):
        registry.version(subject=Subject("a.b-value"), version=Version(9))
    with pytest.raises(SchemaNotFound):
        registry.schema(schema_id=SchemaId(999))


def test_concurrent_registrations_get_distinct_versions_and_shared_ids(
    database_url: str,
) -> None:
    migrate.upgrade(database_url)
    # Separate engines stand in for separate API processes sharing one database.
    engines = [create_database_engine(database_url) for _ in range(4)]
    services = [RegistryService(SchemaStore(e)) for e in engines]
    subject = Subject("race.orders-value")
    # Records of different names never read each other; this test is about ids and versions.
    services[0].set_compatibility(subject=subject, level="NONE")
    results: list[tuple[int, int]] = []
    errors: list[BaseException] = []

    def register(service: RegistryService, worker: int) -> None:
        try:
            for i in range(5):
                # Every worker registers schema i (shared) and one of its own.
                for text in (_schema("Shared", f"f{i}"), _schema(f"Own{worker}", f"f{i}")):
                    r = service.register(subject=subject, schema_text=text)
                    results.append((r.schema_id, r.version))
        except BaseException as exc:  # collected and re-raised in the test thread
            errors.append(exc)

    threads = [threading.Thread(target=register, args=(s, n)) for n, s in enumerate(services)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in engines:
        e.dispose()
    assert not errors, errors
    by_id: dict[int, set[int]] = {}
    for schema_id, version in results:
        by_id.setdefault(schema_id, set()).add(version)
    # 5 shared schemas + 4 workers x 5 own schemas = 25 distinct schemas, each one version.
    assert len(by_id) == 25
    assert all(len(versions) == 1 for versions in by_id.values())
    assert sorted(v for (v,) in by_id.values()) == list(range(1, 26))


def test_upgrading_keeps_finding_schemas_registered_before_identity_ignored_spelling(
    database_url: str,
) -> None:
    # A schema stored by revision 0003, under its old identity (the hash of its compact text).
    import hashlib

    from sqlalchemy import text

    migrate.upgrade(database_url, revision="0003")
    stored = (
        '{"type":"record","name":"Old","namespace":"legacy",'
        '"fields":[{"name":"id","type":"string"}]}'
    )
    engine = create_database_engine(database_url)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO schemas (schema_type, schema_text, fingerprint) "
                "VALUES ('AVRO', :t, :f)"
            ),
            {"t": stored, "f": hashlib.sha256(stored.encode()).hexdigest()},
        )
        schema_id = connection.execute(text("SELECT max(id) FROM schemas")).scalar_one()
        connection.execute(
            text(
                "INSERT INTO subject_versions (subject, version, schema_id, deleted) "
                "VALUES ('legacy.old-value', 1, :id, false)"
            ),
            {"id": schema_id},
        )
    engine.dispose()

    migrate.upgrade(database_url)

    engine = create_database_engine(database_url)
    service = RegistryService(SchemaStore(engine))
    respelled = json.dumps(
        {"namespace": "legacy", "fields": [{"type": "string", "name": "id"}], "name": "Old",
         "type": "record"}
    )  # fmt: skip
    again = service.register(subject=Subject("legacy.old-value"), schema_text=respelled)
    engine.dispose()
    assert (again.schema_id, again.version) == (schema_id, 1)


def test_a_worker_caching_reads_sees_another_workers_deletions(database_url: str) -> None:
    """Two processes' services, both caching: a lookup and an id cached by one stop answering
    once the other deletes them (PostgreSQL: as soon as the notification arrives)."""
    from registry.changes import wait_listening
    from tests.support.waiting import wait_until

    migrate.upgrade(database_url)
    engines = [create_database_engine(database_url) for _ in range(2)]
    here, there = (RegistryService(SchemaStore(e, watch_changes=True)) for e in engines)
    try:
        for service in (here, there):
            assert wait_listening(service._store.changes)
        subject = Subject("cache.carts-value")
        text = _schema("Cart", "id")
        schema_id = there.register(subject=subject, schema_text=text).schema_id

        def cached_here() -> bool:
            # The registration's own notification may arrive after a first read: read again.
            here.lookup(subject=subject, schema_text=text)
            here.stored_schema(schema_id=schema_id)
            return (
                here.cached_lookup(subject=subject, schema_text=text, generation=here.generation())
                is not None
            )

        wait_until(cached_here, timeout_s=10, what="the lookup to be cached", interval_s=0.05)

        there.delete_subject(subject=subject)  # soft: the id still resolves

        wait_until(
            lambda: (
                here.cached_lookup(subject=subject, schema_text=text, generation=here.generation())
                is None
            ),
            timeout_s=10,
            what="the soft delete to reach the other worker",
        )
        with pytest.raises(SubjectNotFound):
            here.lookup(subject=subject, schema_text=text)
        assert here.stored_schema(schema_id=schema_id).schema_id == schema_id

        there.delete_subject(subject=subject, permanent=True)

        wait_until(
            lambda: (
                here.cached_stored_schema(schema_id=schema_id, generation=here.generation()) is None
            ),
            timeout_s=10,
            what="the permanent delete to reach the other worker",
        )
        with pytest.raises(SchemaNotFound):
            here.stored_schema(schema_id=schema_id)
    finally:
        for service in (here, there):
            service.close()
        for engine in engines:
            engine.dispose()
