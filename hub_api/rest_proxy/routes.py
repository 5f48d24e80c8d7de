"""Confluent REST Proxy compatibility: v2 Avro records produced with `POST /topics/{topic}`,
and v3 records, streamed, with `POST /v3/clusters/{cluster_id}/topics/{topic}/records`.

Existing REST Proxy clients publish to hub feeds unchanged. The v2 route parses the request and
renders the REST Proxy's answer; `publish.rest_proxy` resolves the schemas and publishes. The
v3 route checks the caller and the feed, then `hub_api.rest_proxy.v3.ProduceStream` reads the
records and answers each as the stream goes.
"""

import time
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from catalog.errors import FeedNotFound
from hub_api.auth import Caller, require_owner
from hub_api.batches import parse_batch
from hub_api.deps import Feeds, Metrics, PublisherDep, Registry, Services, Settings
from hub_api.errors import UnsupportedMediaType
from hub_api.openapi import raw_body
from hub_api.publishing import REQUEST_ID_RESPONSE_HEADER, publish_target, request_id_of
from hub_api.rest_proxy.models import (
    AVRO_V2_MEDIA_TYPE,
    KafkaJSONResponse,
    PartitionOffsetPublic,
    ProduceRecordV3In,
    ProduceRequestIn,
    ProduceResponsePublic,
)
from hub_api.rest_proxy.v3 import ProduceStream
from hub_api.settings import ApiSettings
from hub_core.errors import ErrorCode, HubError
from publish.errors import ProxyErrorCode, ProxyRefused, RecordErrorCode
from publish.publisher import OnError, PublishResult
from publish.rest_proxy import publish_avro_json, resolve_schemas

router = APIRouter(tags=["rest-proxy"])


@router.post(
    "/topics/{topic}",
    response_model=ProduceResponsePublic,
    response_class=KafkaJSONResponse,
    openapi_extra=raw_body(ProduceRequestIn, AVRO_V2_MEDIA_TYPE),
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
        body = _parse_body(request, await request.body(), settings)
        schemas = await run_in_threadpool(resolve_schemas, registry, feed, body)
    except ProxyRefused as refused:
        return _error(refused.code, refused.message)
    started = time.perf_counter()
    request_id = request_id_of(request.headers.get("x-request-id"))
    outcome = await run_in_threadpool(
        partial(publish_avro_json, request_id=request_id), publisher, feed, body, schemas
    )
    metrics.record_publish(feed.topic, outcome, time.perf_counter() - started)
    offsets = [_offset(r) for r in outcome.results]
    answer = ProduceResponsePublic(
        key_schema_id=schemas.key.registered.schema_id if schemas.key else None,
        value_schema_id=schemas.value.registered.schema_id if schemas.value else None,
        offsets=offsets,
    ).model_dump(mode="json")
    traced = {REQUEST_ID_RESPONSE_HEADER: request_id}
    if any(o.error_code is None for o in offsets) or not any(_invalid(o) for o in offsets):
        # As the REST Proxy: per-record errors in a 200.
        return KafkaJSONResponse(answer, headers=traced)
    first = next(i for i, o in enumerate(offsets) if _invalid(o))
    return _error(
        ProxyErrorCode.JSON_CONVERSION_FAILED,
        f"No record was published: {sum(1 for o in offsets if _invalid(o))} of "
        f"{len(offsets)} do not match the schema; record {first}: {offsets[first].error}",
        **answer,
    )


@router.post(
    "/v3/clusters/{cluster_id}/topics/{topic}/records",
    openapi_extra=raw_body(ProduceRecordV3In, "application/json"),
)
async def produce_records_v3(
    cluster_id: str,
    topic: str,
    request: Request,
    services: Services,
    caller: Caller,
    on_error: Annotated[
        OnError, Query(description="`dlq` (default) or `reject` records that fail validation.")
    ] = OnError.DLQ,
) -> Response:
    """Produce records to a feed as a Confluent REST Proxy v3 client does, one or a stream.

    The body is one record, or, with `Transfer-Encoding: chunked`, records as concatenated
    JSON for as long as the request lasts. Each record's `value.data` (and `key.data`) is
    natural JSON, checked and cleaned against the feed's latest schema as
    `POST /v1/feeds/{topic}/records` does. The answer is 200 and a stream of delivery reports,
    one per record, in order: `error_code` 200 with partition and offset, or the record's error
    code and message. Invalid records go to the feed's dead-letter topic (`on_error=dlq`,
    since a REST Proxy client cannot ask for it) and are reported with their error. The
    cluster id is not checked: the hub answers for the Kafka cluster it writes to.
    """
    try:
        feed, codecs = await publish_target(services.feeds, services.publisher, topic)
    except FeedNotFound:
        return JSONResponse(
            {
                "error_code": int(ProxyErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                "message": f"Topic '{topic}' not found: it is not a hub feed. Create the feed "
                "with POST /v1/feeds, or list feeds with GET /v1/feeds.",
            },
            status_code=404,
        )
    require_owner(caller, feed.owner, what=f"Feed '{topic}'")
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        raise UnsupportedMediaType(
            f"Content-Type '{media_type or '(none)'}' is not supported here; send "
            "application/json (one record, or records as concatenated JSON)."
        )
    request_id = request_id_of(request.headers.get("x-request-id"))
    return ProduceStream(
        request,
        cluster_id=cluster_id,
        topic=topic,
        services=services,
        on_error=on_error,
        request_id=request_id,
        headers={REQUEST_ID_RESPONSE_HEADER: request_id},
        max_record_bytes=codecs.max_record_bytes,
    )


def _parse_body(request: Request, raw: bytes, settings: ApiSettings) -> ProduceRequestIn:
    media_type, _, parameters = request.headers.get("content-type", "").partition(";")
    media_type = media_type.strip().lower()
    charset = parameters.strip().lower().removeprefix("charset=").strip('"')
    if media_type != AVRO_V2_MEDIA_TYPE or charset not in ("", "utf-8", "utf8"):
        raise ProxyRefused(
            ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            f"Content-Type '{request.headers.get('content-type') or '(none)'}' is not supported "
            f"here; send {AVRO_V2_MEDIA_TYPE}: hub feeds carry Avro only (the binary, json, "
            "protobuf and jsonschema embedded formats are not supported).",
        )
    try:
        body = parse_batch(
            raw,
            ProduceRequestIn,
            max_records=settings.max_records_per_request,
            max_depth=settings.max_json_depth,
        )
    except HubError as exc:
        raise ProxyRefused(exc.code, exc.message) from exc
    chosen = [i for i, r in enumerate(body.records) if r.partition is not None]
    if chosen:
        raise ProxyRefused(
            ProxyErrorCode.PARTITION_NOT_SUPPORTED,
            f"Record {chosen[0]} names partition {body.records[chosen[0]].partition}; the hub "
            "chooses partitions from the record key, so records cannot name one. Leave "
            "`partition` out (give a key to keep related records in order).",
        )
    return body


def _offset(result: PublishResult) -> PartitionOffsetPublic:
    if result.error_code is None:
        return PartitionOffsetPublic(
            partition=result.partition, offset=result.offset, error_code=None, error=None
        )
    if result.error_code.http_status < 500:
        code = int(result.error_code)
    elif result.error_code in (ErrorCode.KAFKA_UNAVAILABLE, ErrorCode.PRODUCER_QUEUE_FULL):
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
