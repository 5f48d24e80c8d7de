"""Confluent REST Proxy v2 produce requests: Avro-JSON records through the one publish path.

A request names its value schema (by id, or as text registered when new); keyed feeds encode
keys with their current key schema only. Avro-JSON values become natural JSON and go through
`Publisher` under the schema version the request names, so they are checked, cleaned and encoded
as every other record is.
"""

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from catalog.types import Feed
from hub_core.errors import HubError
from hub_core.naming import TopicName, key_subject, value_subject
from publish.errors import ProxyErrorCode, ProxyRefused
from publish.publisher import IncomingRecord, Publisher, PublishOutcome, PublishResult
from registry.avro import AvroSchema
from registry.avro_json import from_avro_json
from registry.errors import InvalidRecord, InvalidSchema, SchemaNotFound, SubjectNotFound
from registry.service import RegistryService
from registry.types import RegisteredSchema, SchemaId, Subject


class ProxyRecord(Protocol):
    """One record of a request: an Avro-JSON value and, optionally, a key."""

    @property
    def value(self) -> Any: ...

    @property
    def key(self) -> Any: ...


class ProxyRequest(Protocol):
    """What a produce request says about its schemas, and its records."""

    @property
    def key_schema(self) -> str | None: ...

    @property
    def key_schema_id(self) -> int | None: ...

    @property
    def value_schema(self) -> str | None: ...

    @property
    def value_schema_id(self) -> int | None: ...

    @property
    def records(self) -> Sequence[ProxyRecord]: ...


@dataclass(frozen=True, slots=True)
class ProxySchema:
    """A registered schema and its parsed form."""

    registered: RegisteredSchema
    avro: AvroSchema


@dataclass(frozen=True, slots=True)
class ProxySchemas:
    """The schemas a request's values and keys are converted and encoded with."""

    value: ProxySchema | None  # None: every value is null, so none is encoded
    key: ProxySchema | None  # None: the feed has no key fields; keys are plain


def resolve_schemas(registry: RegistryService, feed: Feed, body: ProxyRequest) -> ProxySchemas:
    """The value schema version the request pins and the feed's key schema."""
    topic = TopicName(feed.topic)
    value_subj = Subject(value_subject(topic))
    if body.value_schema_id is not None:
        value: RegisteredSchema | None = _version_with_id(
            registry, value_subj, body.value_schema_id
        )
    elif body.value_schema is not None:
        value = _register(registry, value_subj, body.value_schema)
    elif any(r.value is not None for r in body.records):
        latest = registry.version(subject=value_subj, version=None)
        raise ProxyRefused(
            ProxyErrorCode.VALUE_SCHEMA_MISSING,
            "Request includes values but does not include a value schema: give value_schema "
            f"(the Avro schema as a string) or value_schema_id (the latest version of "
            f"'{value_subj}' is schema id {latest.schema_id}).",
        )
    else:
        value = None
    return ProxySchemas(
        value=ProxySchema(value, registry.schema(schema_id=value.schema_id)) if value else None,
        key=_key_schema(registry, feed, body),
    )


def _version_with_id(
    registry: RegistryService, subject: Subject, schema_id: int
) -> RegisteredSchema:
    try:
        usages = registry.usages(schema_id=SchemaId(schema_id))
    except SchemaNotFound:
        usages = []
    versions = [u for u in usages if u.subject == subject]
    if not versions:
        raise ProxyRefused(
            ProxyErrorCode.SCHEMA_NOT_USABLE,
            f"Schema id {schema_id} is not a version of subject '{subject}'. Give value_schema "
            f"to register it there, or an id listed by GET /subjects/{subject}/versions/latest.",
        )
    return max(versions, key=lambda v: v.version)


def _register(registry: RegistryService, subject: Subject, schema_text: str) -> RegisteredSchema:
    """The version of `subject` with this schema, registered first if it is new."""
    try:
        return registry.lookup(subject=subject, schema_text=schema_text)
    except (SubjectNotFound, SchemaNotFound):
        pass
    except InvalidSchema as exc:
        raise ProxyRefused(ProxyErrorCode.INVALID_SCHEMA, exc.message) from exc
    try:
        return registry.register(subject=subject, schema_text=schema_text)
    except InvalidSchema as exc:
        raise ProxyRefused(ProxyErrorCode.INVALID_SCHEMA, exc.message) from exc
    except HubError as exc:
        if exc.code.http_status >= 500:
            raise  # the registry's store failed: the hub's own 5xx answer
        # 409 incompatible, or a subject mode that refuses writes: as the REST Proxy does.
        raise ProxyRefused(
            ProxyErrorCode.SCHEMA_NOT_USABLE,
            f"Error when registering the schema under subject '{subject}': {exc.message} "
            f"(registry error code {int(exc.code)})",
        ) from exc


def _key_schema(registry: RegistryService, feed: Feed, body: ProxyRequest) -> ProxySchema | None:
    """Keys of keyed feeds are encoded with the feed's current key schema, and only with it."""
    named = body.key_schema is not None or body.key_schema_id is not None
    subject = Subject(key_subject(TopicName(feed.topic)))
    if not feed.key_fields:
        if named:
            raise ProxyRefused(
                ProxyErrorCode.SCHEMA_NOT_USABLE,
                f"Feed '{feed.topic}' has no key schema: it has no key fields, so its keys are "
                "plain strings. Leave key_schema and key_schema_id out and send string keys.",
            )
        return None
    current = registry.version(subject=subject, version=None)
    if body.key_schema is not None:
        try:
            given: int | None = registry.lookup(
                subject=subject, schema_text=body.key_schema
            ).schema_id
        except (SubjectNotFound, SchemaNotFound):
            given = None
        except InvalidSchema as exc:
            raise ProxyRefused(ProxyErrorCode.INVALID_SCHEMA, exc.message) from exc
    else:
        given = body.key_schema_id
    if named and given != current.schema_id:
        raise ProxyRefused(
            ProxyErrorCode.SCHEMA_NOT_USABLE,
            f"The key schema given is not the key schema of feed '{feed.topic}' (schema id "
            f"{current.schema_id}, the record of its key fields {', '.join(feed.key_fields)}, "
            f"subject '{subject}'): keys are always encoded with it. Give key_schema_id "
            f"{current.schema_id}, or leave the key schema out.",
        )
    return ProxySchema(current, registry.schema(schema_id=current.schema_id))


def publish_avro_json(
    publisher: Publisher,
    feed: Feed,
    body: ProxyRequest,
    schemas: ProxySchemas,
    *,
    request_id: str | None = None,
) -> PublishOutcome:
    """Convert each record to natural JSON, publish those that convert; answer every record.
    With a `request_id`, each record carries it (`hub.request-id`), as the feed route's do."""
    converted: list[IncomingRecord | InvalidRecord] = []
    for record in body.records:
        try:
            converted.append(_incoming(record.value, record.key, schemas))
        except InvalidRecord as exc:
            converted.append(exc)
    outcome = publisher.publish(
        feed,
        [c for c in converted if isinstance(c, IncomingRecord)],
        schema_version=schemas.value.registered.version if schemas.value else None,
        request_id=request_id,
    )
    published = iter(outcome.results)
    return replace(
        outcome,
        results=[
            next(published)
            if isinstance(c, IncomingRecord)
            else PublishResult(error_code=c.code, message=c.message, path=c.path or None)
            for c in converted
        ],
    )


def _incoming(value: Any, key: Any, schemas: ProxySchemas) -> IncomingRecord:
    if value is not None and schemas.value is not None:
        value = from_avro_json(value, schemas.value.avro.resolved)
    if key is not None and schemas.key is not None:
        key = from_avro_json(key, schemas.key.avro.resolved, path="$.key")
    return IncomingRecord(value=value, key=key)
