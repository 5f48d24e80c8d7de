"""Registry operations: the rules of the Confluent Schema Registry over the SQL store."""

import threading
from collections.abc import Sequence
from typing import Literal

from cachetools import LRUCache, TTLCache, cachedmethod

from registry.avro import AvroSchema, parse
from registry.changes import AsOf
from registry.cleaning import validate_rules
from registry.compatibility import CompatibilityReport, check
from registry.config import ConfigStore, parse_compatibility, parse_mode
from registry.errors import (
    CompatibilityNotConfigured,
    IdDoesNotMatch,
    IncompatibleSchema,
    InvalidSchema,
    ModeNotConfigured,
    OperationNotPermitted,
    ReferenceExists,
    SchemaNotFound,
    SubjectNotFound,
    SubjectNotSoftDeleted,
    SubjectSoftDeleted,
    VersionNotFound,
    VersionNotSoftDeleted,
    VersionSoftDeleted,
)
from registry.limits import check_explicit_id, check_id_range
from registry.lookups import ENTRY_BYTES, SchemaLookups, stored_size
from registry.schema_rules import SchemaLimits, check_document, check_subject, check_text
from registry.store import SchemaStore
from registry.types import (
    CompatibilityMode,
    RegisteredSchema,
    RegistryMode,
    SchemaId,
    SchemaReference,
    StoredSchema,
    Subject,
    Version,
)


class RegistryService:
    """Register, look up, delete and check schemas; configure compatibility and modes."""

    def __init__(
        self,
        store: SchemaStore,
        config: ConfigStore | None = None,
        *,
        default_compatibility: CompatibilityMode = CompatibilityMode.BACKWARD,
        cache_seconds: float = 5.0,
        limits: SchemaLimits | None = None,
        parse_cache_bytes: int = 64 * 1024 * 1024,
        read_cache_bytes: int = 96 * 1024 * 1024,
    ) -> None:
        self._store = store
        self._changes = store.changes
        self._config = config or ConfigStore(store.sessions)
        self._default_compatibility = default_compatibility
        self._limits = limits or SchemaLimits()
        # A schema id always names the same schema, so parsed schemas are cached by id, and
        # schema text by its own identity, each within `parse_cache_bytes` of estimated memory
        # (a count of entries would let a few large schemas take any amount of it). The least
        # recently used go first; a schema larger than the whole budget is returned, not kept.
        self._by_id: LRUCache[tuple[SchemaId], AvroSchema] = LRUCache(
            parse_cache_bytes, _parsed_size
        )
        self._parsed: LRUCache[tuple[str, tuple[SchemaReference, ...], bool], AvroSchema] = (
            LRUCache(parse_cache_bytes, _parsed_size)
        )
        # Reads by id and lookups need only text and identities, far smaller than parsed
        # schemas: a schema's text by id, and the identity of text as clients send it (keyed by
        # its digest, not the text; kept by `SchemaLookups`). Whether an id is in use and where
        # a schema sits under a subject change with deletions in any process: those answers hold
        # only while the database has not changed since they were read (`registry.changes`, ADR
        # 0032). The two caches of small entries get a quarter of the budget each, about 98,000
        # entries at the default: with an eighth (49,152) a registry of 10,000 subjects x 5
        # versions overflowed them, and its reads by id and lookups went to the database
        # (`bench/registry.py`).
        self._stored: LRUCache[tuple[SchemaId], StoredSchema] = LRUCache(
            read_cache_bytes, stored_size
        )
        self._lookups = SchemaLookups(
            store,
            limits=self._limits,
            parse=self._parse_uncached,
            stored=self._cached_text,
            cache_bytes=read_cache_bytes,
        )
        self._in_use: AsOf[SchemaId, bool] = AsOf(read_cache_bytes // 4, lambda _: ENTRY_BYTES)
        # The latest version, for publishing, is trusted for `cache_seconds`: a new version is
        # used at once by the process that registered it, within that time by the others (at
        # most 10,000 subjects, the least recently used dropped first).
        self._latest: TTLCache[Subject, RegisteredSchema] = TTLCache(10_000, cache_seconds)
        # Threads share the cachetools caches above, which are not thread-safe: each use holds
        # this lock, never while a schema is read or parsed (two threads may load one at once).
        self._cache_lock = threading.Lock()

    def close(self) -> None:
        """Stop watching the database for other processes' changes."""
        self._store.close()

    # --- schemas -------------------------------------------------------------------------

    def parse(
        self,
        schema_text: str,
        *,
        references: Sequence[SchemaReference] = (),
        normalize: bool = False,
    ) -> AvroSchema:
        """Parse schema text, fetching the named types its references point at.

        Stored and looked-up schemas are parsed as they are: the rules of `accept` apply only
        to schemas offered anew, so one registered before a rule existed still resolves.
        """
        return self._parse_cached(schema_text, tuple(references), normalize)

    def accept(
        self,
        schema_text: str,
        *,
        subject: Subject,
        references: Sequence[SchemaReference] = (),
        normalize: bool = False,
    ) -> AvroSchema:
        """Parse a schema offered for `subject` (to register or to check), holding it to the
        registry's rules and limits (`registry.schema_rules`): 42201 naming the rule broken."""
        check_text(schema_text, self._limits, references=len(references))  # before parsing
        schema = self.parse(schema_text, references=references, normalize=normalize)
        check_document(schema.resolved, self._limits)
        check_subject(schema.resolved, subject)
        return schema

    @cachedmethod(lambda self: self._parsed, lock=lambda self: self._cache_lock)
    def _parse_cached(
        self, schema_text: str, references: tuple[SchemaReference, ...], normalize: bool
    ) -> AvroSchema:
        return self._parse_uncached(schema_text, references, normalize)

    def _parse_uncached(
        self, schema_text: str, references: tuple[SchemaReference, ...], normalize: bool
    ) -> AvroSchema:
        resolved = [(ref, self._referenced(ref)) for ref in references]
        schema = parse(schema_text, references=resolved, normalize=normalize)
        validate_rules(schema.resolved)  # cleaning rules are part of the schema's contract
        return schema

    def register(
        self,
        *,
        subject: Subject,
        schema_text: str,
        references: Sequence[SchemaReference] = (),
        normalize: bool = False,
        schema_id: SchemaId | None = None,
        version: Version | None = None,
    ) -> RegisteredSchema:
        """Register a schema under `subject`: an identical live schema keeps its version;
        a new one must pass the subject's compatibility level (409 with every reason)."""
        check_explicit_id(schema_id, version)
        mode = self.mode(subject=subject, default_to_global=True)
        if mode is RegistryMode.READONLY:
            raise OperationNotPermitted(
                f"Subject '{subject}' is in read-only mode; set its mode to READWRITE first."
            )
        importing = mode is RegistryMode.IMPORT
        if (schema_id is not None or version is not None) and not importing:
            raise OperationNotPermitted(
                "A schema id or version can only be given in IMPORT mode "
                f"(subject '{subject}' is in {mode} mode)."
            )
        check_text(schema_text, self._limits, references=len(references))  # before parsing
        schema = self.parse(schema_text, references=references, normalize=normalize)
        existing = self._store.find(
            subject=subject,
            fingerprint=schema.fingerprint,
            references=schema.references,
            include_deleted=False,
        )
        if existing is not None:
            if schema_id is not None and existing.schema_id != schema_id:
                raise IdDoesNotMatch(
                    f"Schema already registered under '{subject}' with id {existing.schema_id}, "
                    f"not the requested id {schema_id}."
                )
            return existing  # registered before: not held again to rules made since
        schema = self.accept(
            schema_text, subject=subject, references=references, normalize=normalize
        )
        if importing:
            self._check_import(subject, schema, schema_id, version)
        else:
            report = self._check_against_subject(subject, schema)
            if not report.compatible:
                level = self.compatibility(subject=subject, default_to_global=True)
                raise IncompatibleSchema(
                    f"Schema being registered is incompatible with an earlier schema for subject "
                    f"'{subject}' (compatibility level {level}): " + "; ".join(report.messages()),
                    reasons=report.messages(),
                )
        registered = self._store.register(
            subject=subject, schema=schema, schema_id=schema_id, version=version
        )
        self._forget(subject)  # this process publishes with the new version at once
        return registered

    def _check_import(
        self,
        subject: Subject,
        schema: AvroSchema,
        schema_id: SchemaId | None,
        version: Version | None,
    ) -> None:
        if schema_id is not None:
            try:
                stored = self._store.get(schema_id=schema_id)[0]
            except SchemaNotFound:
                stored = None
            if stored is not None and stored.fingerprint != schema.fingerprint:
                raise IdDoesNotMatch(
                    f"Schema id {schema_id} is already taken by a different schema; "
                    "import it under a free id."
                )
        if version is not None:
            taken = [v for v in self._store.versions(subject=subject, include_deleted=True)]
            if any(v.version == version for v in taken):
                raise OperationNotPermitted(
                    f"Version {version} of subject '{subject}' already exists; "
                    "an import cannot overwrite it."
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
        return self._lookups.lookup(
            subject=subject,
            schema_text=schema_text,
            references=references,
            normalize=normalize,
            include_deleted=include_deleted,
        )

    def generation(self) -> int | None:
        """The database's generation now (`registry.changes`): what a cached answer must have
        been read at to be given; None when unknown."""
        return self._changes.generation()

    def cached_lookup(
        self, *, subject: Subject, schema_text: str, generation: int | None
    ) -> RegisteredSchema | None:
        """What `lookup` (no references, not normalized, live versions) answered before, if it
        was read at `generation` (from `generation()`, read after the request arrived); None
        otherwise. Never reads the database."""
        return self._lookups.cached_lookup(
            subject=subject, schema_text=schema_text, generation=generation
        )

    def schema(self, *, schema_id: SchemaId) -> AvroSchema:
        """The parsed schema with id `schema_id`, while a subject version (live or soft-deleted)
        uses it: 40403 once it is deleted for good."""
        check_id_range(schema_id)
        self._check_in_use(schema_id)
        return self._schema_by_id(schema_id)

    def stored_schema(self, *, schema_id: SchemaId) -> StoredSchema:
        """The text and references of schema `schema_id`, as `schema` finds it (40403 once no
        subject version uses it), without parsing it."""
        check_id_range(schema_id)
        self._check_in_use(schema_id)
        return self._stored_by_id(schema_id)

    def cached_stored_schema(
        self, *, schema_id: SchemaId, generation: int | None
    ) -> StoredSchema | None:
        """What `stored_schema` answered before, if it was read at `generation` (as for
        `cached_lookup`); None otherwise. Never reads the database."""
        if self._in_use.get(schema_id, generation):
            return self._cached_text(schema_id)
        return None

    def _cached_text(self, schema_id: SchemaId) -> StoredSchema | None:
        with self._cache_lock:  # `cachedmethod` keys an entry by the arguments' tuple
            return self._stored.get((schema_id,))

    def _check_in_use(self, schema_id: SchemaId) -> None:
        generation = self._changes.generation()
        in_use = self._in_use.get(schema_id, generation)
        if in_use is None:
            in_use = self._store.is_used(schema_id=schema_id)
            self._in_use.put(schema_id, generation, in_use)
        if not in_use:
            raise SchemaNotFound(schema_id)

    @cachedmethod(lambda self: self._stored, lock=lambda self: self._cache_lock)
    def _stored_by_id(self, schema_id: SchemaId) -> StoredSchema:
        row, references = self._store.get(schema_id=schema_id)
        return StoredSchema(schema_id=schema_id, schema=row.schema_text, references=references)

    def current(self, *, subject: Subject) -> RegisteredSchema:
        """The latest live version of `subject` as of at most `cache_seconds` ago.

        For hot paths (publishing) that may use a new version a few seconds late: at once in
        the process that registered it, within `cache_seconds` in the others.
        """
        latest = self.current_if_cached(subject=subject)
        if latest is None:
            latest = self.version(subject=subject, version=None)
            with self._cache_lock:
                self._latest[subject] = latest
        return latest

    def current_if_cached(self, *, subject: Subject) -> RegisteredSchema | None:
        """`current(subject=...)` when it is answered from memory, else None: for callers on an
        event loop, which must not wait on the database."""
        with self._cache_lock:
            return self._latest.get(subject)

    @cachedmethod(lambda self: self._by_id, lock=lambda self: self._cache_lock)
    def _schema_by_id(self, schema_id: SchemaId) -> AvroSchema:
        row, references = self._store.get(schema_id=schema_id)
        return self.parse(row.schema_text, references=references)

    def _referenced(self, ref: SchemaReference) -> AvroSchema:
        # A soft-deleted version still defines its types: schemas that use it keep resolving.
        try:
            target = self._store.get_version(
                subject=ref.subject, version=ref.version, include_deleted=True
            )
        except (SubjectNotFound, VersionNotFound):
            # The schema is what is wrong, not the subject it is registered under (Confluent).
            raise InvalidSchema(
                f"Invalid schema: reference '{ref.name}' names version {ref.version} of subject "
                f"'{ref.subject}', which does not exist; register it first or fix the reference."
            ) from None
        return self._schema_by_id(target.schema_id)

    def version(
        self, *, subject: Subject, version: Version | None, include_deleted: bool = False
    ) -> RegisteredSchema:
        """A version of `subject`; None means the latest live one."""
        return self._store.get_version(
            subject=subject, version=version, include_deleted=include_deleted
        )

    def versions(self, *, subject: Subject, include_deleted: bool = False) -> list[Version]:
        """The version numbers of `subject` (40401 when it has none)."""
        found = self._store.versions(subject=subject, include_deleted=include_deleted)
        if not found:
            raise SubjectNotFound(subject)
        return [v.version for v in found]

    def subjects(self, *, prefix: str = "", include_deleted: bool = False) -> list[Subject]:
        """Subjects with a live version (or any, with `include_deleted`), sorted."""
        return self._store.list(prefix=prefix, include_deleted=include_deleted)

    def schemas(
        self,
        *,
        prefix: str = "",
        include_deleted: bool = False,
        latest_only: bool = False,
        offset: int = 0,
        limit: int | None = None,
    ) -> list[RegisteredSchema]:
        """Subject versions, by subject then version; `latest_only` keeps each subject's last."""
        found = self._store.list_schemas(prefix=prefix, include_deleted=include_deleted)
        if latest_only:
            last: dict[Subject, RegisteredSchema] = {}
            for item in found:
                last[item.subject] = item
            found = list(last.values())
        end = None if limit is None or limit < 0 else offset + limit
        return found[offset:end]

    def usages(
        self, *, schema_id: SchemaId, include_deleted: bool = False
    ) -> list[RegisteredSchema]:
        """Subject versions that use schema `schema_id` (40403 when none does)."""
        check_id_range(schema_id)
        found = self._store.usages(schema_id=schema_id, include_deleted=include_deleted)
        if not found:
            raise SchemaNotFound(schema_id)
        return found

    def referenced_by(self, *, subject: Subject, version: Version | None) -> list[SchemaId]:
        """Ids of schemas that reference this version of `subject`."""
        target = self.version(subject=subject, version=version)
        return self._store.referenced_by(subject=subject, version=target.version)

    # --- deletion ------------------------------------------------------------------------

    def delete_subject(self, *, subject: Subject, permanent: bool = False) -> list[Version]:
        """Soft-delete every version of `subject`, or purge the soft-deleted ones."""
        self._writable(subject)
        all_versions = self._store.versions(subject=subject, include_deleted=True)
        if not all_versions:
            raise SubjectNotFound(subject)
        live = [v for v in all_versions if not v.deleted]
        if permanent:
            if live:
                raise SubjectNotSoftDeleted(subject)
            numbers = [v.version for v in all_versions]
            self._store.purge(subject=subject, versions=numbers)
            self._forget(subject)
            # Clear only what is set: clearing an unset level would have the config store
            # delete a row it never wrote.
            configured = self._config.get(subject=subject)
            if configured.compatibility is not None:
                self._config.set_compatibility(subject=subject, compatibility=None)
            if configured.mode is not None:
                self._config.set_mode(subject=subject, mode=None)
            return numbers
        if not live:
            raise SubjectSoftDeleted(subject)
        for item in live:
            self._not_referenced(item)
        numbers = [v.version for v in live]
        self._store.set_deleted(subject=subject, versions=numbers)
        self._forget(subject)
        return numbers

    def delete_version(
        self, *, subject: Subject, version: Version | None, permanent: bool = False
    ) -> Version:
        """Soft-delete one version (None: the latest live), or purge a soft-deleted one."""
        self._writable(subject)
        all_versions = self._store.versions(subject=subject, include_deleted=True)
        if not all_versions:
            raise SubjectNotFound(subject)
        if version is None:
            target = self._store.get_version(subject=subject, version=None)
        else:
            matches = [v for v in all_versions if v.version == version]
            if not matches:
                raise VersionNotFound(subject, version)
            target = matches[0]
        if permanent:
            if not target.deleted:
                raise VersionNotSoftDeleted(subject, target.version)
            self._store.purge(subject=subject, versions=[target.version])
            self._forget(subject)
            return target.version
        if target.deleted:
            raise VersionSoftDeleted(subject, target.version)
        self._not_referenced(target)
        self._store.set_deleted(subject=subject, versions=[target.version])
        self._forget(subject)
        return target.version

    def _forget(self, subject: Subject) -> None:
        """Drop the latest version of `subject` this process publishes with (what else a
        deletion changes, the store's change signal outdates)."""
        with self._cache_lock:
            self._latest.pop(subject, None)

    def _not_referenced(self, item: RegisteredSchema) -> None:
        users = self._store.referenced_by(subject=item.subject, version=item.version)
        if users:
            raise ReferenceExists(
                f"Subject '{item.subject}' version {item.version} is referenced by schema id(s) "
                f"{', '.join(map(str, users))}; delete those first."
            )

    def _writable(self, subject: Subject) -> None:
        if self.mode(subject=subject, default_to_global=True) is RegistryMode.READONLY:
            raise OperationNotPermitted(
                f"Subject '{subject}' is in read-only mode; set its mode to READWRITE first."
            )

    # --- compatibility -------------------------------------------------------------------

    def check_compatibility(
        self,
        *,
        subject: Subject,
        schema_text: str,
        references: Sequence[SchemaReference] = (),
        version: Version | Literal["all"] | None = "all",
        normalize: bool = False,
    ) -> CompatibilityReport:
        """Check a candidate against one version (None: the latest) or, with "all", against
        the versions the subject's level names."""
        schema = self.accept(
            schema_text, subject=subject, references=references, normalize=normalize
        )
        if version == "all":
            return self._check_against_subject(subject, schema)
        target = self.version(subject=subject, version=version)
        level = self.compatibility(subject=subject, default_to_global=True)
        single = _NON_TRANSITIVE.get(level, level)
        return check(
            [self._schema_by_id(target.schema_id).resolved],
            schema.resolved,
            single,
            versions=[target.version],
        )

    def _check_against_subject(self, subject: Subject, schema: AvroSchema) -> CompatibilityReport:
        level = self.compatibility(subject=subject, default_to_global=True)
        live = self._store.versions(subject=subject)
        return check(
            [self._schema_by_id(v.schema_id).resolved for v in live],
            schema.resolved,
            level,
            versions=[v.version for v in live],
        )

    # --- configuration -------------------------------------------------------------------

    def compatibility(
        self, *, subject: Subject | None = None, default_to_global: bool = True
    ) -> CompatibilityMode:
        """The level in force for `subject` (or registry-wide)."""
        own, registry_wide = self._config.levels(subject=subject)
        if subject is not None:
            if own.compatibility is not None:
                return own.compatibility
            if not default_to_global:
                raise CompatibilityNotConfigured(subject)
        return registry_wide.compatibility or self._default_compatibility

    def set_compatibility(self, *, subject: Subject | None, level: str) -> CompatibilityMode:
        parsed = parse_compatibility(level)
        self._config.set_compatibility(subject=subject, compatibility=parsed)
        return parsed

    def delete_compatibility(self, *, subject: Subject | None) -> CompatibilityMode:
        """Clear the level at this level and return the one that was in force."""
        previous = self.compatibility(subject=subject, default_to_global=subject is None)
        self._config.set_compatibility(subject=subject, compatibility=None)
        return previous

    def mode(
        self, *, subject: Subject | None = None, default_to_global: bool = True
    ) -> RegistryMode:
        """The mode in force for `subject` (or registry-wide)."""
        own, registry_wide = self._config.levels(subject=subject)
        if subject is not None:
            if own.mode is not None:
                return own.mode
            if not default_to_global:
                raise ModeNotConfigured(subject)
        return registry_wide.mode or RegistryMode.READWRITE

    def set_mode(self, *, subject: Subject | None, mode: str, force: bool = False) -> RegistryMode:
        """Set a mode; IMPORT needs an empty subject (or registry) unless `force`."""
        parsed = parse_mode(mode)
        if (
            parsed is RegistryMode.IMPORT
            and not force
            and not self._store.is_empty(subject=subject)
        ):
            where = f"subject '{subject}'" if subject else "the registry"
            raise OperationNotPermitted(
                f"Cannot switch {where} to IMPORT mode: it already holds schemas. "
                "Pass force=true to import into it anyway."
            )
        self._config.set_mode(subject=subject, mode=parsed)
        return parsed

    def delete_mode(self, *, subject: Subject | None) -> RegistryMode:
        """Clear the mode at this level and return the one that was in force."""
        previous = self.mode(subject=subject, default_to_global=subject is None)
        self._config.set_mode(subject=subject, mode=None)
        return previous


# What a parsed schema takes in memory, per character of its text (its JSON tree, the resolved
# tree and fastavro's parsed form: about 14 for the benchmark's 15-field records).
_PARSED_BYTES_PER_CHARACTER = 16


def _parsed_size(schema: AvroSchema) -> int:
    """What a parsed schema counts for in a cache: an estimate of its memory."""
    return len(schema.canonical) * _PARSED_BYTES_PER_CHARACTER


# A check against one chosen version uses the level's direction, not its transitivity.
_NON_TRANSITIVE = {
    CompatibilityMode.BACKWARD_TRANSITIVE: CompatibilityMode.BACKWARD,
    CompatibilityMode.FORWARD_TRANSITIVE: CompatibilityMode.FORWARD,
    CompatibilityMode.FULL_TRANSITIVE: CompatibilityMode.FULL,
}
