"""The publish gateway: records in as natural JSON, out to Kafka as framed Avro.

`publish_request` is the whole request after the caller is known. Two doors lead to it: the
FastAPI route below, which documents the endpoint (OpenAPI) and serves requests with unusual
options, and `hub_api.publish_lane.PublishLane`, which serves the common request without
FastAPI's routing and dependency resolution (docs/adr/0031-lean-publish-lane.md).
"""

import itertools
import os
import re
import time
import uuid
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from pydantic_core import to_json

from catalog.types import Feed, Principal
from hub_api.auth import Caller, require_owner
from hub_api.batches import parse_publish_body
from hub_api.metrics import HubMetrics
from hub_api.openapi import raw_body
from hub_api.publish_models import PublishPublic, RecordsIn, publish_answer
from hub_api.settings import ApiSettings
from publish.feeds import FeedService
from publish.idempotent import Answer, Attempt, IdempotentRequests
from publish.publisher import Codecs, OnError, Publisher
from registry.types import Version

router = APIRouter(prefix="/v1", tags=["publish"])
RECORDS_PATH = "/v1/feeds/{topic}/records"
REQUEST_ID_RESPONSE_HEADER = "X-Request-Id"
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_ISSUERS: dict[int, str] = {}  # process id -> the prefix of the request ids it makes
_SEQUENCE = itertools.count()


@dataclass(frozen=True, slots=True)
class Gateway:
    """What a publish request uses, as the app set it up."""

    feeds: FeedService
    publisher: Publisher
    idempotency: IdempotentRequests
    settings: ApiSettings
    metrics: HubMetrics

    @classmethod
    def of(cls, state: Any) -> "Gateway":
        """The gateway of an app, from its `app.state`."""
        return cls(state.feeds, state.publisher, state.idempotency, state.api_settings,
                   state.metrics)  # fmt: skip


def _gateway(request: Request) -> Gateway:
    return Gateway.of(request.app.state)


GatewayDep = Annotated[Gateway, Depends(_gateway)]


@router.post(
    "/feeds/{topic}/records",
    response_model=PublishPublic,
    openapi_extra=raw_body(RecordsIn, "application/json"),
)
async def publish_records(
    topic: str,
    request: Request,
    gateway: GatewayDep,
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
        gateway,
        request,
        topic,
        caller,
        on_error=on_error,
        atomic=atomic,
        idempotency_key=idempotency_key,
    )


async def publish_request(
    gateway: Gateway,
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
    feed, latest = await publish_target(gateway.feeds, gateway.publisher, topic)
    require_owner(caller, feed.owner, what=f"Feed '{topic}'")
    raw = await request.body()
    settings = gateway.settings
    records, schema_version = parse_publish_body(
        raw,
        content_type=request.headers.get("content-type", ""),
        max_records=settings.max_records_per_request,
        max_depth=settings.max_json_depth,
    )
    version = Version(schema_version) if schema_version else None
    publisher = gateway.publisher
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
        gateway.metrics.record_publish(feed.topic, outcome, time.perf_counter() - started)
        retry_later = any(
            r.error_code is not None and r.error_code.http_status == 503 for r in outcome.results
        )
        status, content = publish_answer(topic, outcome)
        return Attempt(Answer(status, to_json(content)), reached_kafka=outcome.accepted > 0)

    answer = await gateway.idempotency.answer(
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


def request_id_of(given: str | None) -> str:
    """The request's id: the caller's `X-Request-Id` when it is a plain token (up to 64
    letters, digits, `.`, `_`, `:`, `-`), else a new one. It travels into Kafka headers and
    tables, so nothing else is taken from the caller."""
    if given is not None and _REQUEST_ID.fullmatch(given):
        return given
    # A random prefix per process and a counter: unique across workers and replicas, and
    # cheaper on the publish path than a uuid4 per request.
    pid = os.getpid()
    prefix = _ISSUERS.get(pid)
    if prefix is None:
        prefix = _ISSUERS[pid] = uuid.uuid4().hex[:16]
    return f"{prefix}-{next(_SEQUENCE):x}"


async def publish_target(
    feeds: FeedService, publisher: Publisher, topic: str
) -> tuple[Feed, Codecs]:
    """The feed of `topic` and how its records are encoded (latest schema).

    Both are cached lookups: answered on the event loop when they need no database read
    (nearly always), else in one thread-pool hand-off.
    """
    feed = feeds.current_if_cached(topic)
    if feed is not None:
        codecs = publisher.codecs_if_cached(feed)
        if codecs is not None:
            return feed, codecs
    return await run_in_threadpool(_lookups, feeds, publisher, topic)


def _lookups(feeds: FeedService, publisher: Publisher, topic: str) -> tuple[Feed, Codecs]:
    feed = feeds.current(topic)
    return feed, publisher.codecs(feed)
