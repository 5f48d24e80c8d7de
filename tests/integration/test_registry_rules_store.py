"""The registry rules that depend on the database (ids, purges, settings rows, races), run
against the service on SQLite and PostgreSQL alike."""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event

from hub_core.database import create_database_engine
from migrations import migrate
from registry.errors import (
    CompatibilityNotConfigured,
    ModeNotConfigured,
    SchemaNotFound,
)
from registry.service import RegistryService
from registry.store import SchemaStore
from registry.types import RegisteredSchema, SchemaId, SchemaReference, Subject, Version
from tests.support.registry_rules import (
    order_schemas,
    record_schema,
)

pytestmark = pytest.mark.integration


# --- the same rules on SQLite and PostgreSQL ----------------------------------------------


@pytest.fixture
def registry(database_url: str) -> Iterator[RegistryService]:
    migrate.upgrade(database_url)
    engine = create_database_engine(database_url)
    yield RegistryService(SchemaStore(engine))
    engine.dispose()


def test_store_purged_schemas_stop_resolving_and_ids_move_on(registry: RegistryService) -> None:
    subject = Subject("purge.me-value")
    v1, v2, _ = order_schemas()
    first = registry.register(subject=subject, schema_text=v1).schema_id
    second = registry.register(subject=subject, schema_text=v2).schema_id
    registry.delete_subject(subject=subject)
    # Soft-deleted schemas resolve (and are now in the parse cache).
    assert registry.schema(schema_id=first).json == json.loads(v1)
    assert registry.schema(schema_id=second).json == json.loads(v2)

    assert registry.delete_subject(subject=subject, permanent=True) == [1, 2]
    for gone in (first, second):
        with pytest.raises(SchemaNotFound):
            registry.schema(schema_id=gone)
    newcomer = registry.register(
        subject=Subject("after-value"), schema_text=record_schema("N", ("a", "int"))
    )
    assert newcomer.schema_id > max(first, second)


@pytest.mark.parametrize("settings", ["none", "compatibility", "mode", "both"])
def test_store_permanent_delete_removes_the_subject_settings(
    registry: RegistryService, settings: str
) -> None:
    subject = Subject("settings.purge-value")
    v1, _, _ = order_schemas()
    registry.register(subject=subject, schema_text=v1)
    if settings in ("compatibility", "both"):
        registry.set_compatibility(subject=subject, level="FULL")
    if settings in ("mode", "both"):
        registry.set_mode(subject=subject, mode="READWRITE")
    registry.delete_subject(subject=subject)
    assert registry.delete_subject(subject=subject, permanent=True) == [1]
    with pytest.raises(CompatibilityNotConfigured):
        registry.compatibility(subject=subject, default_to_global=False)
    with pytest.raises(ModeNotConfigured):
        registry.mode(subject=subject, default_to_global=False)
    # The subject starts over.
    assert registry.register(subject=subject, schema_text=v1).version == 1


def test_store_ids_allocated_after_an_import_stay_above_it(registry: RegistryService) -> None:
    subject = Subject("imported-value")
    registry.set_mode(subject=subject, mode="IMPORT")
    imported = registry.register(
        subject=subject,
        schema_text=record_schema("Imp", ("a", "string")),
        schema_id=SchemaId(5000),
        version=Version(12),
    )
    assert (imported.schema_id, imported.version) == (5000, 12)
    registry.delete_mode(subject=subject)
    later = [
        registry.register(
            subject=Subject(f"later{n}-value"), schema_text=record_schema(f"L{n}", ("a", "int"))
        )
        for n in range(3)
    ]
    assert [r.schema_id > 5000 for r in later] == [True, True, True]
    assert len({r.schema_id for r in later}) == 3
    assert (
        registry.register(
            subject=subject, schema_text=record_schema("Imp", ("a", "string"))
        ).version
        == 12
    )


def test_store_soft_deleted_references_still_resolve(
    database_url: str, registry: RegistryService
) -> None:
    address = record_schema("Address", ("street", "string"), namespace="refs")
    person = record_schema("Person", ("home", "refs.Address"), namespace="refs")
    registry.register(subject=Subject("refs.address"), schema_text=address)
    reference = SchemaReference(
        name="refs.Address", subject=Subject("refs.address"), version=Version(1)
    )
    person_id = registry.register(
        subject=Subject("refs.person-value"), schema_text=person, references=[reference]
    ).schema_id
    registry.delete_subject(subject=Subject("refs.person-value"))
    registry.delete_subject(subject=Subject("refs.address"))

    # A fresh service (another process) has nothing cached.
    engine = create_database_engine(database_url)
    try:
        fresh = RegistryService(SchemaStore(engine))
        resolved = fresh.schema(schema_id=person_id)
    finally:
        engine.dispose()
    assert resolved.references == (reference,)
    assert resolved.json == json.loads(person)


def test_store_a_registration_racing_the_same_one_adds_no_second_version(
    database_url: str,
) -> None:
    migrate.upgrade(database_url)
    # Two engines stand in for two API processes on one database.
    engines = [create_database_engine(database_url) for _ in range(2)]
    first, second = (RegistryService(SchemaStore(engine)) for engine in engines)
    subject = Subject("raced-value")
    schema = record_schema("Raced", ("a", "string"))
    # The schema row exists already, so its unique fingerprint cannot serialize the two.
    first.register(subject=Subject("elsewhere-value"), schema_text=schema)
    raced: list[RegisteredSchema] = []

    def meanwhile(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        # Once `first` has looked for a live version and is about to number a new one, the
        # other process registers the same schema under the same subject.
        if "max(" in statement.lower() and not raced:
            raced.append(second.register(subject=subject, schema_text=schema))

    event.listen(engines[0], "before_cursor_execute", meanwhile)
    try:
        mine = first.register(subject=subject, schema_text=schema)
        versions = first.versions(subject=subject)
    finally:
        event.remove(engines[0], "before_cursor_execute", meanwhile)
        for engine in engines:
            engine.dispose()
    assert raced, "the interleaving never happened: registration no longer numbers versions"
    assert mine == raced[0]
    assert versions == [1]
