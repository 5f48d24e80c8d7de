"""Lookups: which version of a subject holds the schema text a client sends.

A lookup finds a schema by its identity (fingerprint and references), so text is parsed once per
distinct text: the identity of text as clients send it is remembered by the text's digest, and
text is held to the size, nesting and reference limits before it is parsed, since anyone may look
a schema up. Where a schema sits under a subject changes with deletions in any process, so what a
lookup found is used only while the database has not changed since it was read
(`registry.changes`, ADR 0032).
"""

import dataclasses
import hashlib
from collections.abc import Callable, Sequence

from hub_core.sized_cache import SizedLruCache
from registry.avro import AvroSchema
from registry.changes import AsOf
from registry.errors import SchemaNotFound, SubjectNotFound
from registry.schema_rules import SchemaLimits, check_text
from registry.store import SchemaStore
from registry.types import RegisteredSchema, SchemaId, SchemaReference, StoredSchema, Subject

_IdentityKey = tuple[bytes, tuple[SchemaReference, ...], bool]  # text digest, references, normal
_Identity = tuple[str, tuple[SchemaReference, ...]]  # fingerprint, references
# What a small cache entry takes besides its text: key, tuple, object headers.
ENTRY_BYTES = 256


class SchemaLookups:
    """Finds the subject version holding a schema text, and remembers what it found.

    `parse` parses text with its references as `RegistryService` does, without the rules on
    the parsed schema; `stored` is the registry's cache of schema text by id, whose strings the
    answers share.
    """

    def __init__(
        self,
        store: SchemaStore,
        *,
        limits: SchemaLimits,
        parse: Callable[[str, tuple[SchemaReference, ...], bool], AvroSchema],
        stored: SizedLruCache[SchemaId, StoredSchema],
        cache_bytes: int,
    ) -> None:
        self._store = store
        self._changes = store.changes
        self._limits = limits
        self._parse = parse
        self._stored = stored
        # Identities are small entries: a quarter of the budget (see `RegistryService`).
        self._identities: SizedLruCache[_IdentityKey, _Identity] = SizedLruCache(
            cache_bytes // 4, lambda _: ENTRY_BYTES
        )
        self._found: AsOf[tuple[Subject, str, bool], RegisteredSchema] = AsOf(
            cache_bytes, _registered_size
        )

    def lookup(
        self,
        *,
        subject: Subject,
        schema_text: str,
        references: Sequence[SchemaReference] = (),
        normalize: bool = False,
        include_deleted: bool = False,
    ) -> RegisteredSchema:
        """The version of `subject` holding this schema (40401 no subject, 40403 no such schema;
        42201 for text over the size, nesting or references limits, before it is parsed)."""
        fingerprint, refs = self._identity(schema_text, tuple(references), normalize)
        key = (subject, fingerprint, include_deleted)
        generation = self._changes.generation()  # before the read: see `AsOf.put`
        found = self._found.get(key, generation)
        if found is None:
            found = self._store.find(
                subject=subject,
                fingerprint=fingerprint,
                references=refs,
                include_deleted=include_deleted,
            )
            if found is not None:
                found = self._sharing_text(found)
                self._found.put(key, generation, found)
        if found is not None:
            return found
        if not self._store.subject_exists(subject=subject, include_deleted=include_deleted):
            raise SubjectNotFound(subject)
        raise SchemaNotFound.under(subject)

    def _sharing_text(self, found: RegisteredSchema) -> RegisteredSchema:
        """`found` holding the very string the by-id cache holds for its schema, if it has it:
        each cache would otherwise keep its own copy of every schema's text."""
        stored = self._stored.get(found.schema_id)
        if stored is None or stored.schema is found.schema or stored.schema != found.schema:
            return found
        return dataclasses.replace(found, schema=stored.schema)

    def cached_lookup(
        self, *, subject: Subject, schema_text: str, generation: int | None
    ) -> RegisteredSchema | None:
        """What `lookup` (no references, not normalized, live versions) answered before, if it
        was read at `generation`; None otherwise. Never reads the database."""
        if len(schema_text) > self._limits.max_bytes:
            return None  # `_identity` refuses it, so it was never cached: skip its digest
        identity = self._identities.get((_digest(schema_text), (), False))
        if identity is None:
            return None
        return self._found.get((subject, identity[0], False), generation)

    def _identity(
        self, schema_text: str, references: tuple[SchemaReference, ...], normalize: bool
    ) -> _Identity:
        """The identity (fingerprint) of schema text and the references it was given with."""
        key = (_digest(schema_text), references, normalize)
        known = self._identities.get(key)
        if known is None:
            # Anyone may look a schema up, so what is sent is held to the limits registration
            # holds it to before parsing (size, JSON nesting, references): parsing is what costs.
            # The rules on the parsed schema are not applied: a schema registered before a rule
            # existed must still be found.
            check_text(schema_text, self._limits, references=len(references))
            schema = self._parse(schema_text, references, normalize)
            known = (schema.fingerprint, schema.references)
            self._identities.get_or_load(key, lambda: known)
        return known


def _digest(schema_text: str) -> bytes:
    # Lone surrogates are valid in JSON strings: they must not fail the encoding.
    return hashlib.sha256(schema_text.encode("utf-8", "surrogatepass")).digest()


def _registered_size(found: RegisteredSchema) -> int:
    return len(found.schema) + len(found.subject) + ENTRY_BYTES
