"""Registry operations: the one place that combines parsing, storage and caching."""

from functools import lru_cache

from registry.avro import AvroSchema, parse
from registry.errors import InvalidVersion
from registry.store import SchemaStore
from registry.types import RegisteredSchema, SchemaId, Subject, Version

_MAX_VERSION = 2**31 - 1


def parse_version(text: str) -> Version | None:
    """A version path parameter: a positive integer, or `latest` (returned as None)."""
    if text == "latest" or text == "-1":
        return None
    try:
        version = int(text)
    except ValueError:
        raise InvalidVersion(text) from None
    if not 1 <= version <= _MAX_VERSION:
        raise InvalidVersion(text)
    return Version(version)


class RegistryService:
    """Register and look up schemas. Schemas by id are immutable, so they are cached."""

    def __init__(self, store: SchemaStore, *, cache_size: int = 10_000) -> None:
        self._store = store
        self._schema_by_id = lru_cache(maxsize=cache_size)(self._load_schema)

    def register(self, *, subject: Subject, schema_text: str) -> RegisteredSchema:
        """Register `schema_text` under `subject`; an identical schema keeps its version."""
        return self._store.register(subject=subject, schema=parse(schema_text))

    def schema(self, *, schema_id: SchemaId) -> AvroSchema:
        """The parsed schema with id `schema_id` (cached)."""
        return self._schema_by_id(schema_id)

    def version(self, *, subject: Subject, version: Version | None) -> RegisteredSchema:
        """A version of `subject`; None means the latest."""
        return self._store.get_version(subject=subject, version=version)

    def subjects(self) -> list[Subject]:
        """Every subject with a live version."""
        return self._store.list()

    def _load_schema(self, schema_id: SchemaId) -> AvroSchema:
        _, text = self._store.get(schema_id=schema_id)
        return parse(text)
