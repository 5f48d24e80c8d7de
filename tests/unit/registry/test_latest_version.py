"""Publishing uses a subject's latest version, cached for `cache_seconds`: a version registered
by this process is used at once, one registered by another within `cache_seconds`."""

import json

import pytest
from sqlalchemy import Engine

from registry.service import RegistryService
from registry.store import SchemaStore
from registry.types import Subject

pytestmark = pytest.mark.unit

SUBJECT = Subject("shop.visits-value")
V1 = {"type": "record", "name": "Visit", "fields": [{"name": "id", "type": "long"}]}
V2 = {
    **V1,
    "fields": [*V1["fields"], {"name": "note", "type": ["null", "string"], "default": None}],
}


def test_a_version_registered_here_is_the_current_one_at_once(hub_engine: Engine) -> None:
    registry = RegistryService(SchemaStore(hub_engine), cache_seconds=60)
    registry.register(subject=SUBJECT, schema_text=json.dumps(V1))
    assert registry.current(subject=SUBJECT).version == 1  # now cached for a minute

    registry.register(subject=SUBJECT, schema_text=json.dumps(V2))

    assert registry.current(subject=SUBJECT).version == 2


def test_another_process_sees_a_new_version_once_its_cache_expires(hub_engine: Engine) -> None:
    here = RegistryService(SchemaStore(hub_engine), cache_seconds=60)
    there = RegistryService(SchemaStore(hub_engine), cache_seconds=0)
    here.register(subject=SUBJECT, schema_text=json.dumps(V1))
    assert here.current(subject=SUBJECT).version == 1
    assert there.current(subject=SUBJECT).version == 1

    there.register(subject=SUBJECT, schema_text=json.dumps(V2))

    assert here.current(subject=SUBJECT).version == 1  # trusted for its cache_seconds
    assert there.current(subject=SUBJECT).version == 2
