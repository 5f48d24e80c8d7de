"""Reads by id and lookups are cached, but never outlive a deletion made by another process:
two services on separate engines over one SQLite file stand for two API workers."""

import json
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from hub_core.database import create_database_engine
from registry.errors import SchemaNotFound, SubjectNotFound
from registry.service import RegistryService
from registry.store import SchemaStore
from registry.types import SchemaId, Subject

pytestmark = pytest.mark.unit

SUBJECT = Subject("shop.carts-value")
V1 = {"type": "record", "name": "Cart", "fields": [{"name": "id", "type": "long"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "n", "type": "int", "default": 0}]}


@pytest.fixture
def workers(hub_engine: Engine) -> Iterator[tuple[RegistryService, RegistryService]]:
    """(here, there): two services, each with its own engine and change signal."""
    other = create_database_engine(hub_engine.url.render_as_string(hide_password=False))
    here = RegistryService(SchemaStore(hub_engine, watch_changes=True))
    there = RegistryService(SchemaStore(other, watch_changes=True))
    try:
        yield here, there
    finally:
        here.close()
        there.close()
        other.dispose()


def _cached_lookup(registry: RegistryService, schema: dict[str, object]) -> object:
    registry.lookup(subject=SUBJECT, schema_text=json.dumps(schema))  # fills the cache
    return _cached(registry, schema)


def _cached(
    registry: RegistryService, schema: dict[str, object], subject: Subject = SUBJECT
) -> object:
    """The cached lookup answer, at the database's generation now."""
    return registry.cached_lookup(
        subject=subject, schema_text=json.dumps(schema), generation=registry.generation()
    )


def _cached_by_id(registry: RegistryService, schema_id: SchemaId) -> object:
    return registry.cached_stored_schema(schema_id=schema_id, generation=registry.generation())


def test_a_cached_lookup_is_refused_once_another_process_soft_deletes_its_version(
    workers: tuple[RegistryService, RegistryService],
) -> None:
    here, there = workers
    there.register(subject=SUBJECT, schema_text=json.dumps(V1))
    there.register(subject=SUBJECT, schema_text=json.dumps(V2))
    assert _cached_lookup(here, V2) is not None

    there.delete_version(subject=SUBJECT, version=None)  # soft: v2

    assert _cached(here, V2) is None
    with pytest.raises(SchemaNotFound):
        here.lookup(subject=SUBJECT, schema_text=json.dumps(V2))
    deleted = here.lookup(subject=SUBJECT, schema_text=json.dumps(V2), include_deleted=True)
    assert (deleted.version, deleted.deleted) == (2, True)
    there.delete_subject(subject=SUBJECT)
    with pytest.raises(SubjectNotFound):
        here.lookup(subject=SUBJECT, schema_text=json.dumps(V1))


def test_a_schema_by_id_resolves_after_a_soft_delete_and_not_after_a_hard_one(
    workers: tuple[RegistryService, RegistryService],
) -> None:
    here, there = workers
    schema_id = there.register(subject=SUBJECT, schema_text=json.dumps(V1)).schema_id
    assert here.stored_schema(schema_id=schema_id).schema == json.dumps(V1, separators=(",", ":"))

    there.delete_subject(subject=SUBJECT)  # soft, as Confluent: the id still resolves
    assert here.stored_schema(schema_id=schema_id).schema_id == schema_id
    assert _cached_by_id(here, schema_id) is not None

    there.delete_subject(subject=SUBJECT, permanent=True)
    assert _cached_by_id(here, schema_id) is None
    with pytest.raises(SchemaNotFound):
        here.stored_schema(schema_id=schema_id)
    with pytest.raises(SchemaNotFound):
        here.schema(schema_id=schema_id)


def test_an_id_unknown_when_first_asked_resolves_once_another_process_registers_it(
    workers: tuple[RegistryService, RegistryService],
) -> None:
    here, there = workers
    with pytest.raises(SchemaNotFound):
        here.stored_schema(schema_id=SchemaId(1))  # remembered as not in use

    schema_id = there.register(subject=SUBJECT, schema_text=json.dumps(V1)).schema_id

    assert here.stored_schema(schema_id=schema_id).schema_id == schema_id


def test_a_lookup_cached_for_one_subject_answers_nothing_for_another(
    workers: tuple[RegistryService, RegistryService],
) -> None:
    here, there = workers
    there.register(subject=SUBJECT, schema_text=json.dumps(V1))
    assert _cached_lookup(here, V1) is not None

    other = Subject("other.carts-value")
    assert _cached(here, V1, other) is None
    with pytest.raises(SubjectNotFound):
        here.lookup(subject=other, schema_text=json.dumps(V1))
