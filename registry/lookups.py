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
import threading
from collections.abc import Callable, Sequence

from cachetools import LRUCache, cachedmethod

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


def _identity_key(
    _lookups: object, schema_text: str, references: tuple[SchemaReference, ...], normalize: bool
) -> _IdentityKey:
    """Text is remembered by its digest, not held: a cache of identities stays small."""
    # Lone surrogates are valid in JSON strings: they must not fail the encoding.
    digest = hashlib.sha256(schema_text.encode("utf-8", "surrogatepass")).digest()
    return (digest, references, normalize)


class SchemaLookups:
    """Finds the subject version holding a schema text, and remembers what it found.

    `parse` parses text with its references as `RegistryService` does, without the rules on
    the parsed schema; `stored` answers from the registry's cache of schema text by id (None
    when it does not hold the id), whose strings the answers share.
    """

    def __init__(
        self,
        store: SchemaStore,
        *,
        limits: SchemaLimits,
        parse: Callable[[str, tuple[SchemaReference, ...], bool], AvroSchema],
        stored: Callable[[SchemaId], StoredSchema | None],
        cache_bytes: int,
    ) -> None:
        self._store = store
        self._changes = store.changes
        self._limits = limits
        self._parse = parse
        self._stored = stored
        # Identities are small entries: a quarter of the budget (see `RegistryService`), the
        # least recently used dropped first. Threads share the cache, which is not safe for
        # threads: each use holds the lock, never while text is parsed.
        self._identities: LRUCache[_IdentityKey, _Identity] = LRUCache(
            cache_bytes // 4, lambda _: ENTRY_BYTES
        )
        self._lock = threading.Lock()
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
        stored = self._stored(found.schema_id)
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
        with self._lock:
            identity = self._identities.get(_identity_key(self, schema_text, (), False))
        if identity is None:
            return None
        return self._found.get((subject, identity[0], False), generation)

    @cachedmethod(lambda self: self._identities, key=_identity_key, lock=lambda self: self._lock)
    def _identity(
        self, schema_text: str, references: tuple[SchemaReference, ...], normalize: bool
    ) -> _Identity:
        """The identity (fingerprint) of schema text and the references it was given with."""
        # Anyone may look a schema up, so what is sent is held to the limits registration holds
        # it to before parsing (size, JSON nesting, references): parsing is what costs. The rules
        # on the parsed schema are not applied: a schema registered before a rule existed must
        # still be found.
        check_text(schema_text, self._limits, references=len(references))
        schema = self._parse(schema_text, references, normalize)
        return (schema.fingerprint, schema.references)


def stored_size(stored: StoredSchema) -> int:
    """What a schema's text by id counts for in a cache: an estimate of its memory."""
    return len(stored.schema) + ENTRY_BYTES


def _registered_size(found: RegisteredSchema) -> int:
    return len(found.schema) + len(found.subject) + ENTRY_BYTES
