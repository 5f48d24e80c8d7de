"""The publish gateway: records in as natural JSON, out to Kafka as framed Avro."""

import time
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from pydantic_core import to_json

from catalog.types import Feed
from hub_api.auth import Caller, require_owner
from hub_api.batches import check_count, load_json, plain_records, validate
from hub_api.deps import Feeds, Idempotency, Metrics, PublisherDep, Settings
from hub_api.errors import UnsupportedMediaType
from hub_api.publish_models import PublishPublic, RecordsIn
from publish.feeds import FeedService
from publish.idempotent import Answer, Attempt
from publish.publisher import (
    Codecs,
    IncomingRecord,
    OnError,
    Publisher,
    PublishOutcome,
    PublishResult,
)
from registry.types import Version

router = APIRouter(prefix="/v1", tags=["publish"])

_JSON_TYPES = ("application/json", "application/vnd.hub.v1+json")


@router.post(
    "/feeds/{topic}/records",
    response_model=PublishPublic,
    openapi_extra={
        "requestBody": {
            "content": {"application/json": {"schema": RecordsIn.model_json_schema()}},
            "required": True,
        }
    },
)
async def publish_records(
    topic: str,
    request: Request,
    feeds: Feeds,
    publisher: PublisherDep,
    idempotency: Idempotency,
    settings: Settings,
    metrics: Metrics,
    caller: Caller,
    on_error: Annotated[OnError, Query(description="`reject` or `dlq` invalid records.")] = (
        OnError.REJECT
    ),
    atomic: Annotated[bool, Query(description="All records or none (Kafka transaction).")] = False,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", max_length=255)] = None,
) -> Response:
    """Publish records to a feed; each is answered after Kafka acknowledged it.

    200 when every record was accepted (or dead-lettered as asked); 207 when some were not;
    the error status of the first failure when none was. A retry with the same
    `Idempotency-Key` gets the first answer and publishes nothing again.
    """
    # The feed and how its records are encoded (latest schema), in one hand-off: both are
    # cached lookups that may read the database.
    feed, latest = await run_in_threadpool(_lookups, feeds, publisher, topic)
    require_owner(caller, feed.owner, what=f"Feed '{topic}'")
    raw = await request.body()
    records, schema_version = _parse_body(request, raw, settings.max_records_per_request)
    version = Version(schema_version) if schema_version else None

    async def attempt() -> Attempt:
        started = time.perf_counter()
        if atomic:  # a Kafka transaction blocks its thread until committed
            outcome = await run_in_threadpool(
                lambda: publisher.publish(
                    feed,
                    records,
                    schema_version=version,
                    atomic=True,
                    idempotency_key=idempotency_key,
                )
            )
        else:
            # Checking, encoding and producing run on the event loop; the acknowledgements
            # are awaited.
            codecs = (
                latest
                if version is None
                else await run_in_threadpool(publisher.codecs, feed, version)
            )
            outcome = await publisher.publish_async(
                codecs, records, on_error=on_error, idempotency_key=idempotency_key
            )
        metrics.record_publish(feed.topic, outcome, time.perf_counter() - started)
        status, content = _answer(topic, outcome)
        return Attempt(Answer(status, to_json(content)), reached_kafka=outcome.accepted > 0)

    answer = await idempotency.answer(
        scope=f"{feed.topic}|{caller.key_id}",
        key=idempotency_key,
        request=raw + f"|{on_error}|{atomic}".encode(),
        attempt=attempt,
    )
    headers = {"Retry-After": "5"} if answer.status_code == 503 else {}
    if answer.replayed:
        headers["Idempotent-Replayed"] = "true"
    return Response(
        answer.body, status_code=answer.status_code, headers=headers, media_type="application/json"
    )


def _lookups(feeds: FeedService, publisher: Publisher, topic: str) -> tuple[Feed, Codecs]:
    feed = feeds.current(topic)
    return feed, publisher.codecs(feed)


def _parse_body(
    request: Request, raw: bytes, max_records: int
) -> tuple[list[IncomingRecord], int | None]:
    """The records and the pinned schema version; records in the plain shape skip the model."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type not in _JSON_TYPES:
        raise UnsupportedMediaType(
            f"Content-Type '{content_type or '(none)'}' is not supported; send application/json."
        )
    document = load_json(raw)
    check_count(document, max_records)
    plain = plain_records(document)
    if plain is not None:
        return plain
    body = validate(document, RecordsIn)
    records = [
        IncomingRecord(value=r.value, key=r.key, headers=r.headers, timestamp=r.timestamp)
        for r in body.records
    ]
    return records, body.schema_version


def _answer(topic: str, outcome: PublishOutcome) -> tuple[int, dict[str, object]]:
    """The status and body (shaped as `PublishPublic`, documented in the OpenAPI schema).

    Built as plain dicts and rendered by pydantic-core: per-record models cost more than
    everything else in the answer.
    """
    results: list[dict[str, object]] = []
    accepted = handled = 0
    for r in outcome.results:
        if r.error_code is None and not r.cleaned:
            results.append({"partition": r.partition, "offset": r.offset})
            accepted += 1
        else:
            results.append(_result(r))
            accepted += r.error_code is None
        handled += r.error_code is None or r.dead_lettered
    if handled == len(results):
        status = 200
    elif handled:
        status = 207
    else:
        first = next(r.error_code for r in outcome.results if r.error_code is not None)
        status = first.http_status
    return status, {
        "topic": topic,
        "schema_id": outcome.schema_id,
        "schema_version": outcome.schema_version,
        "accepted": accepted,
        "rejected": len(results) - accepted,
        "results": results,
    }


def _result(result: PublishResult) -> dict[str, object]:
    if result.ok:
        answer: dict[str, object] = {"partition": result.partition, "offset": result.offset}
    else:
        answer = {"error_code": int(result.error_code or 0), "message": result.message}
        if result.path:
            answer["path"] = result.path
        if result.dead_lettered:
            answer["dead_lettered"] = True
    if result.cleaned:
        answer["cleaned"] = [
            {"path": c.path, "rule": str(c.rule), "before": c.before, "after": c.after}
            for c in result.cleaned
        ]
    return answer
