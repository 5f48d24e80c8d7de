"""Confluent REST Proxy v2 compatibility: Avro records produced with `POST /topics/{topic}`.

Existing REST Proxy clients publish to hub feeds unchanged. Their Avro-JSON values are turned
into natural JSON and go through the one publish path (`Publisher`) under the schema version the
request names, so they are checked, cleaned and encoded as every other record is.
"""

import time
from dataclasses import dataclass, replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool

from catalog.errors import FeedNotFound
from catalog.types import Feed
from hub_api.auth import Caller, require_owner
from hub_api.batches import parse_batch
from hub_api.deps import Feeds, Metrics, PublisherDep, Registry, Settings
from hub_api.rest_proxy_models import (
    AVRO_V2_MEDIA_TYPE,
    KafkaJSONResponse,
    PartitionOffsetPublic,
    ProduceRequestIn,
    ProduceResponsePublic,
    ProxyErrorCode,
    RecordErrorCode,
)
from hub_kafka.publish import IncomingRecord, Publisher, PublishOutcome, PublishResult
from hub_kafka.topics import TopicName, key_subject, value_subject
from registry.avro import AvroSchema
from registry.avro_json import from_avro_json
from registry.errors import (
    ErrorCode,
    HubError,
    InvalidRecord,
    InvalidSchema,
    SchemaNotFound,
    SubjectNotFound,
)
from registry.service import RegistryService
from registry.types import RegisteredSchema, SchemaId, Subject

router = APIRouter(tags=["rest-proxy"])


class _Refused(Exception):
    """A whole request refused, with a REST Proxy code or one of the hub's."""

    def __init__(self, code: ProxyErrorCode | ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class _Schema:
    registered: RegisteredSchema
    avro: AvroSchema


@dataclass(frozen=True, slots=True)
class _Schemas:
    value: _Schema | None  # None: every value is null, so none is encoded
    key: _Schema | None  # None: the feed has no key fields; keys are plain


@router.post(
    "/topics/{topic}",
    response_model=ProduceResponsePublic,
    response_class=KafkaJSONResponse,
    openapi_extra={
        "requestBody": {
            "content": {AVRO_V2_MEDIA_TYPE: {"schema": ProduceRequestIn.model_json_schema()}},
            "required": True,
        }
    },
)
async def produce_avro(
    topic: str,
    request: Request,
    feeds: Feeds,
    registry: Registry,
    publisher: PublisherDep,
    settings: Settings,
    metrics: Metrics,
    caller: Caller,
) -> KafkaJSONResponse:
    """Produce Avro records to a feed as a Confluent REST Proxy v2 client does.

    Values (and keys of keyed feeds) are in the Avro JSON encoding. `value_schema` is registered
    under `<topic>-value` when new; `value_schema_id` must be a version of that subject; either
    pins the version the records are validated and encoded with. The answer lists, per record,
    its partition and offset, or an error: `1`/`2` for Kafka failures (non-retriable/retriable),
    the hub's code (42220, ...) for a record that does not match its schema. 200 unless no
    record could be published because the records were invalid (422, code 42203).
    """
    try:
        feed = await run_in_threadpool(feeds.current, topic)
    except FeedNotFound:
        return _error(
            ProxyErrorCode.TOPIC_NOT_FOUND,
            f"Topic '{topic}' not found: it is not a hub feed. Create the feed with "
            "POST /v1/feeds, or list feeds with GET /v1/feeds.",
        )
    require_owner(caller, feed.owner, what=f"Feed '{topic}'")
    try:
        body = _parse_body(request, await request.body(), settings.max_records_per_request)
        schemas = await run_in_threadpool(_schemas, registry, feed, body)
    except _Refused as refused:
        return _error(refused.code, refused.message)
    started = time.perf_counter()
    outcome = await run_in_threadpool(_publish, publisher, feed, body, schemas)
    metrics.record_publish(feed.topic, outcome, time.perf_counter() - started)
    offsets = [_offset(r) for r in outcome.results]
    answer = ProduceResponsePublic(
        key_schema_id=schemas.key.registered.schema_id if schemas.key else None,
        value_schema_id=schemas.value.registered.schema_id if schemas.value else None,
        offsets=offsets,
    ).model_dump(mode="json")
    if any(o.error_code is None for o in offsets) or not any(_invalid(o) for o in offsets):
        return KafkaJSONResponse(answer)  # as the REST Proxy: per-record errors in a 200
    first = next(i for i, o in enumerate(offsets) if _invalid(o))
    return _error(
        ProxyErrorCode.JSON_CONVERSION_FAILED,
        f"No record was published: {sum(1 for o in offsets if _invalid(o))} of "
        f"{len(offsets)} do not match the schema; record {first}: {offsets[first].error}",
        **answer,
    )


def _parse_body(request: Request, raw: bytes, max_records: int) -> ProduceRequestIn:
    media_type, _, parameters = request.headers.get("content-type", "").partition(";")
    media_type = media_type.strip().lower()
    charset = parameters.strip().lower().removeprefix("charset=").strip('"')
    if media_type != AVRO_V2_MEDIA_TYPE or charset not in ("", "utf-8", "utf8"):
        raise _Refused(
            ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            f"Content-Type '{request.headers.get('content-type') or '(none)'}' is not supported "
            f"here; send {AVRO_V2_MEDIA_TYPE}: hub feeds carry Avro only (the binary, json, "
            "protobuf and jsonschema embedded formats are not supported).",
        )
    try:
        body = parse_batch(raw, ProduceRequestIn, max_records=max_records)
    except HubError as exc:
        raise _Refused(exc.code, exc.message) from exc
    chosen = [i for i, r in enumerate(body.records) if r.partition is not None]
    if chosen:
        raise _Refused(
            ProxyErrorCode.PARTITION_NOT_SUPPORTED,
            f"Record {chosen[0]} names partition {body.records[chosen[0]].partition}; the hub "
            "chooses partitions from the record key, so records cannot name one. Leave "
            "`partition` out (give a key to keep related records in order).",
        )
    return body


def _schemas(registry: RegistryService, feed: Feed, body: ProduceRequestIn) -> _Schemas:
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
        raise _Refused(
            ProxyErrorCode.VALUE_SCHEMA_MISSING,
            "Request includes values but does not include a value schema: give value_schema "
            f"(the Avro schema as a string) or value_schema_id (the latest version of "
            f"'{value_subj}' is schema id {latest.schema_id}).",
        )
    else:
        value = None
    return _Schemas(
        value=_Schema(value, registry.schema(schema_id=value.schema_id)) if value else None,
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
        raise _Refused(
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
        raise _Refused(ProxyErrorCode.INVALID_SCHEMA, exc.message) from exc
    try:
        return registry.register(subject=subject, schema_text=schema_text)
    except InvalidSchema as exc:
        raise _Refused(ProxyErrorCode.INVALID_SCHEMA, exc.message) from exc
    except HubError as exc:
        if exc.code.http_status >= 500:
            raise  # the registry's store failed: the hub's own 5xx answer
        # 409 incompatible, or a subject mode that refuses writes: as the REST Proxy does.
        raise _Refused(
            ProxyErrorCode.SCHEMA_NOT_USABLE,
            f"Error when registering the schema under subject '{subject}': {exc.message} "
            f"(registry error code {int(exc.code)})",
        ) from exc


def _key_schema(registry: RegistryService, feed: Feed, body: ProduceRequestIn) -> _Schema | None:
    """Keys of keyed feeds are encoded with the feed's current key schema, and only with it."""
    named = body.key_schema is not None or body.key_schema_id is not None
    subject = Subject(key_subject(TopicName(feed.topic)))
    if not feed.key_fields:
        if named:
            raise _Refused(
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
            raise _Refused(ProxyErrorCode.INVALID_SCHEMA, exc.message) from exc
    else:
        given = body.key_schema_id
    if named and given != current.schema_id:
        raise _Refused(
            ProxyErrorCode.SCHEMA_NOT_USABLE,
            f"The key schema given is not the key schema of feed '{feed.topic}' (schema id "
            f"{current.schema_id}, the record of its key fields {', '.join(feed.key_fields)}, "
            f"subject '{subject}'): keys are always encoded with it. Give key_schema_id "
            f"{current.schema_id}, or leave the key schema out.",
        )
    return _Schema(current, registry.schema(schema_id=current.schema_id))


def _publish(
    publisher: Publisher, feed: Feed, body: ProduceRequestIn, schemas: _Schemas
) -> PublishOutcome:
    """Convert each record to natural JSON, publish those that convert; answer every record."""
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


def _incoming(value: Any, key: Any, schemas: _Schemas) -> IncomingRecord:
    if value is not None and schemas.value is not None:
        value = from_avro_json(value, schemas.value.avro.resolved)
    if key is not None and schemas.key is not None:
        key = from_avro_json(key, schemas.key.avro.resolved, path="$.key")
    return IncomingRecord(value=value, key=key)


def _offset(result: PublishResult) -> PartitionOffsetPublic:
    if result.error_code is None:
        return PartitionOffsetPublic(
            partition=result.partition, offset=result.offset, error_code=None, error=None
        )
    if result.error_code.http_status < 500:
        code = int(result.error_code)
    elif result.error_code is ErrorCode.KAFKA_UNAVAILABLE:
        code = RecordErrorCode.KAFKA_RETRIABLE_ERROR
    else:  # KAFKA_REFUSED, and any other server-side failure
        code = RecordErrorCode.KAFKA_ERROR
    return PartitionOffsetPublic(partition=None, offset=None, error_code=code, error=result.message)


def _invalid(offset: PartitionOffsetPublic) -> bool:
    """A record refused for what it is (a 4xx code), not for what Kafka did."""
    return offset.error_code is not None and offset.error_code >= 40000


def _error(code: ProxyErrorCode | ErrorCode, message: str, **extra: Any) -> KafkaJSONResponse:
    """The REST Proxy's error body, `{"error_code", "message"}`, in its media type."""
    return KafkaJSONResponse(
        {"error_code": int(code), "message": message, **extra}, status_code=code.http_status
    )
