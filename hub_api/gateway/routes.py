"""The publish gateway: records in as natural JSON, out to Kafka as framed Avro.

`publish_request` is the whole request after the caller is known. Two doors lead to it: the
FastAPI route below, which documents the endpoint (OpenAPI) and serves requests with unusual
options, and `hub_api.gateway.lane.PublishLane`, which serves the common request without
FastAPI's routing and dependency resolution (docs/adr/0031-lean-publish-lane.md).
"""

import time
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from pydantic_core import to_json

from catalog.types import Principal
from hub_api.auth import Caller, require_owner
from hub_api.deps import Services
from hub_api.gateway.body import parse_publish_body
from hub_api.gateway.models import PublishPublic, RecordsIn, publish_answer
from hub_api.openapi import raw_body
from hub_api.publishing import REQUEST_ID_RESPONSE_HEADER, publish_target, request_id_of
from hub_api.services import HubServices
from publish.idempotent import Answer, Attempt
from publish.publisher import OnError
from registry.types import Version

router = APIRouter(prefix="/v1", tags=["publish"])
RECORDS_PATH = "/v1/feeds/{topic}/records"


@router.post(
    "/feeds/{topic}/records",
    response_model=PublishPublic,
    openapi_extra=raw_body(RecordsIn, "application/json"),
)
async def publish_records(
    topic: str,
    request: Request,
    services: Services,
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
    `Idempotency-Key` gets the first answer and publishes nothing again. Each record carries
    the request's id (`X-Request-Id`, given or made) as a header; the answer names it.
    """
    return await publish_request(
        services,
        request,
        topic,
        caller,
        on_error=on_error,
        atomic=atomic,
        idempotency_key=idempotency_key,
    )


async def publish_request(
    services: HubServices,
    request: Request,
    topic: str,
    caller: Principal,
    *,
    on_error: OnError,
    atomic: bool,
    idempotency_key: str | None,
) -> Response:
    """Answer a publish request of `caller`, whose key was verified: 403 unless it owns the
    feed, then the body read, checked and published. Raises `HubError`s for whole-request
    failures, which the caller renders."""
    feed, latest = await publish_target(services.feeds, services.publisher, topic)
    require_owner(caller, feed.owner, what=f"Feed '{topic}'")
    raw = await request.body()
    settings = services.settings
    records, schema_version = parse_publish_body(
        raw,
        content_type=request.headers.get("content-type", ""),
        max_records=settings.max_records_per_request,
        max_depth=settings.max_json_depth,
    )
    version = Version(schema_version) if schema_version else None
    publisher = services.publisher
    request_id = request_id_of(request.headers.get("x-request-id"))

    retry_later = False  # a record was answered 503: Kafka or the producer queue was busy

    async def attempt() -> Attempt:
        nonlocal retry_later
        started = time.perf_counter()
        if atomic:  # a Kafka transaction blocks its thread until committed
            outcome = await run_in_threadpool(
                lambda: publisher.publish(
                    feed,
                    records,
                    schema_version=version,
                    atomic=True,
                    idempotency_key=idempotency_key,
                    request_id=request_id,
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
                codecs,
                records,
                on_error=on_error,
                idempotency_key=idempotency_key,
                request_id=request_id,
            )
        services.metrics.record_publish(feed.topic, outcome, time.perf_counter() - started)
        retry_later = any(
            r.error_code is not None and r.error_code.http_status == 503 for r in outcome.results
        )
        status, content = publish_answer(topic, outcome)
        return Attempt(Answer(status, to_json(content)), reached_kafka=outcome.accepted > 0)

    answer = await services.idempotency.answer(
        scope=f"{feed.topic}|{caller.key_id}",
        key=idempotency_key,
        request=raw + f"|{on_error}|{atomic}".encode(),
        attempt=attempt,
    )
    # A replayed answer stays the same however late the retry: no Retry-After on it.
    headers = {"Retry-After": "5"} if answer.status_code == 503 or retry_later else {}
    headers[REQUEST_ID_RESPONSE_HEADER] = request_id
    if answer.replayed:
        headers["Idempotent-Replayed"] = "true"
    return Response(
        answer.body, status_code=answer.status_code, headers=headers, media_type="application/json"
    )
