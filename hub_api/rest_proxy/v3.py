"""Confluent REST Proxy v3 produce, streamed: records in, delivery reports out, in order.

`POST /v3/clusters/{cluster_id}/topics/{topic}/records` takes one record (a v3 `ProduceRequest`)
or, in streaming mode, a chunked body of records as concatenated JSON, and answers 200 with a
stream of delivery reports, one per record, in the order the records came: Confluent's
`ProduceResponse` (`error_code` 200, `cluster_id`, `topic_name`, `partition_id`, `offset`,
`timestamp`, the key's and value's schema and size), or `{"error_code", "message"}` for a record
that was not published. A bad record does not stop the stream; text that is not JSON does (its
error is the last report), as in Confluent's REST Proxy.

How it streams. A reader task takes the body's chunks as they arrive; `RecordSplitter` finds
the records' ends, looking at each byte once, and a chunk's records are parsed on the event
loop when they are small, in a worker thread when not, so no chunk holds the loop for long
(hub_api/rest_proxy/record_stream.py). The records each chunk completes become one group:
checked, cleaned and encoded (`PreparedBatch`, as the feed route does) and handed to the
producer before the next chunk is read, so Kafka gets them in order. The group then waits for its
acknowledgements in a bounded queue while the reader goes on; the response writes each group's
reports once Kafka answered, in queue order. Many groups await Kafka at once, and a client that
stops reading reports stops the reader, and so its own writing, once `MAX_GROUPS_IN_FLIGHT`
groups wait.
"""

import asyncio
import base64
import binascii
import logging
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from pydantic_core import to_json
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from hub_api.batches import validate
from hub_api.errors import BodyTooLarge
from hub_api.publishing import publish_target
from hub_api.rest_proxy.models import ProduceDataV3In, ProduceRecordV3In
from hub_api.rest_proxy.record_stream import RecordSplitter, parse_records
from hub_api.services import HubServices
from hub_core.errors import ErrorCode, HubError
from hub_core.naming import TopicName, dlq_topic, value_subject
from publish.errors import ProxyErrorCode, ProxyRefused
from publish.publisher import (
    DEFAULT_MAX_RECORD_BYTES,
    IncomingRecord,
    OnError,
    PreparedBatch,
    PublishResult,
    SentBatch,
)

log = logging.getLogger(__name__)

MAX_GROUPS_IN_FLIGHT = 64
# Records of a chunk up to this many bytes are parsed on the event loop (well under a
# millisecond); more, up to a chunk's worth plus a record at the size limit, in a worker thread.
PARSE_ON_LOOP_BYTES = 64 * 1024
_SCHEMA_FIELDS = ("subject", "subject_name_strategy", "schema_id", "schema_version", "schema_")


@dataclass(frozen=True, slots=True)
class _Group:
    """Records read from one part of the body: those handed to the publisher, and those
    refused before it (by position in the group)."""

    sent: SentBatch | None
    refused: dict[int, HubError | ProxyRefused]
    size: int
    started: float  # perf_counter when read
    produced_ms: int  # when handed to the producer: the Kafka timestamp of records without one


@dataclass(frozen=True, slots=True)
class _Failed:
    """The stream could not be read on (not JSON, over the size limit): the last report."""

    code: ErrorCode
    message: str


class ProduceStream(Response):
    """The streamed answer of a v3 produce request (see the module docstring)."""

    media_type = "application/json"

    def __init__(
        self,
        request: Request,
        *,
        cluster_id: str,
        topic: str,
        services: HubServices,
        on_error: OnError,
        request_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    ) -> None:
        super().__init__(status_code=200, media_type=self.media_type, headers=headers)
        # Every record of the stream carries the one HTTP request's id (`hub.request-id`).
        self._request_id = request_id
        self._request = request
        self._cluster_id = cluster_id
        self._topic = topic
        self._services = services
        self._on_error = on_error
        self._max_record_bytes = max_record_bytes
        self._dlq = dlq_topic(TopicName(topic))
        self._value_subject = value_subject(TopicName(topic))
        self._crash: BaseException | None = None
        self._head = (
            f'{{"error_code":200,"cluster_id":{_json(cluster_id)},'
            f'"topic_name":{_json(topic)},"partition_id":'
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # No Content-Length: the server sends the reports in chunks as they come.
        headers = [(name, value) for name, value in self.raw_headers if name != b"content-length"]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        groups: asyncio.Queue[_Group | _Failed | None] = asyncio.Queue(MAX_GROUPS_IN_FLIGHT)
        reader = asyncio.create_task(self._read(groups))
        try:
            while (group := await groups.get()) is not None:
                body = await self._reports(group)
                await send({"type": "http.response.body", "body": body, "more_body": True})
        finally:
            reader.cancel()
            with suppress(asyncio.CancelledError):
                await reader
        if self._crash is not None:
            raise self._crash  # the server logs it and cuts the answer short: not a report
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _read(self, groups: "asyncio.Queue[_Group | _Failed | None]") -> None:
        splitter = RecordSplitter(
            max_depth=self._services.settings.max_json_depth,
            max_record_bytes=self._max_record_bytes,
        )
        try:
            async for chunk in self._request.stream():
                texts = splitter.feed(chunk)
                if not texts:
                    continue
                if sum(len(t) for t in texts if isinstance(t, bytes)) <= PARSE_ON_LOOP_BYTES:
                    documents, failed = parse_records(texts)
                else:
                    documents, failed = await run_in_threadpool(parse_records, texts)
                if documents:
                    await groups.put(await self._send(documents))
                if failed is not None:
                    raise failed
            splitter.end()
        except HubError as exc:  # malformed JSON, too deep
            await groups.put(_Failed(exc.code, exc.message))
        except BodyTooLarge:
            await groups.put(
                _Failed(
                    ErrorCode.PAYLOAD_TOO_LARGE,
                    f"The stream sent more than {self._services.settings.max_body_bytes} bytes "
                    "(HUB_API_MAX_BODY_BYTES); the records before this report were answered. "
                    "Send the rest in a new request.",
                )
            )
        except ClientDisconnect:
            pass
        except Exception as exc:  # a defect: the answer stops, and the server logs why
            self._crash = exc
        await groups.put(None)

    async def _send(self, documents: list[Any]) -> _Group:
        """Check, encode and hand to the producer the records of `documents`, in order."""
        started = time.perf_counter()
        records: list[IncomingRecord] = []
        refused: dict[int, HubError | ProxyRefused] = {}
        for position, document in enumerate(documents):
            if isinstance(document, HubError):  # over the size limit, unread
                refused[position] = document
                continue
            try:
                records.append(incoming_record(document))
            except (HubError, ProxyRefused) as exc:
                refused[position] = exc
        try:
            # Per group, so that a long stream takes up a new schema version as the feed
            # route does; from memory, nearly always.
            _feed, codecs = await publish_target(
                self._services.feeds, self._services.publisher, self._topic
            )
        except HubError as exc:  # the feed was deleted, the registry is unavailable
            all_refused: dict[int, HubError | ProxyRefused] = dict.fromkeys(
                range(len(documents)), exc
            )
            return _Group(None, all_refused, len(documents), started, 0)
        batch = PreparedBatch(records, codecs, on_error=self._on_error, request_id=self._request_id)
        sent = await self._services.publisher.send_async(codecs, batch)
        return _Group(sent, refused, len(documents), started, int(time.time() * 1000))

    async def _reports(self, group: _Group | _Failed) -> bytes:
        """The group's reports, once Kafka answered for all of its records."""
        if isinstance(group, _Failed):
            return _line({"error_code": int(group.code), "message": group.message})
        lines = []
        results = None
        if group.sent is not None:
            outcome = await group.sent.outcome()
            self._services.metrics.record_publish(
                self._topic, outcome, time.perf_counter() - group.started
            )
            results = iter(zip(outcome.results, group.sent.batch.prepared, strict=True))
            published = self._published(group.sent, group.produced_ms)
        for position in range(group.size):
            refusal = group.refused.get(position)
            if refusal is not None:
                lines.append(_line({"error_code": int(refusal.code), "message": refusal.message}))
                continue
            assert results is not None
            result, prepared = next(results)
            if result.error_code is None:
                lines.append(published(result, prepared))
            else:
                lines.append(_line(self._failure(result)))
        return b"".join(lines)

    def _published(
        self, sent: SentBatch, produced_ms: int
    ) -> Callable[[PublishResult, Any], bytes]:
        """How a published record of `sent` is reported (Confluent's ProduceResponse), from
        templates made once per group: a dict and its rendering per record cost more than the
        rest of the report."""
        codecs = sent.codecs
        keys = codecs.keys
        avro_key = (
            f',"key":{{"type":"AVRO","subject":{_json(keys.subject)},'
            f'"schema_id":{keys.schema_id},"size":'
        )
        value_meta = (
            f',"value":{{"type":"AVRO","subject":{_json(self._value_subject)},'
            f'"schema_id":{codecs.values.schema_id},"schema_version":{codecs.version},"size":'
        )
        produced = _iso(produced_ms)
        head = self._head

        def report(result: PublishResult, prepared: Any) -> bytes:
            (_topic, key, value, _headers, timestamp_ms), _changes = prepared
            line = (
                f'{head}{result.partition},"offset":{result.offset},"timestamp":'
                f'"{produced if timestamp_ms is None else _iso(timestamp_ms)}"'
            )
            if key is not None:  # an Avro key, or a plain key of a feed without key fields
                meta = avro_key if key and keys.schema is not None else ',"key":{"size":'
                line += f"{meta}{len(key)}}}"
            if value is not None:
                line += f"{value_meta}{len(value)}}}"
            return (line + "}\n").encode()

        return report

    def _failure(self, result: PublishResult) -> dict[str, Any]:
        """A record that was not published: its code and message."""
        assert result.error_code is not None
        message = result.message or ""
        if result.path:
            message = message if result.path in message else f"{result.path}: {message}"
        if result.dead_lettered:
            message += f" The record was written to the dead-letter topic '{self._dlq}'."
        return {"error_code": int(result.error_code), "message": message}


def incoming_record(document: Any) -> IncomingRecord:
    """A v3 `ProduceRequest` as the publisher takes it; 40001, 41501 or 42200 when it cannot
    be one (the record alone is refused)."""
    plain = _plain_record(document)
    if plain is not None:
        return plain
    request = validate(document, ProduceRecordV3In)
    if request.partition_id is not None:
        raise ProxyRefused(
            ProxyErrorCode.PARTITION_NOT_SUPPORTED,
            f"partition_id {request.partition_id}: the hub chooses partitions from the record "
            "key, so a record cannot name one. Leave `partition_id` out (give a key to keep "
            "related records in order).",
        )
    headers = None
    if request.headers:
        headers = {}
        for index, header in enumerate(request.headers):
            if header.name in headers:
                raise ProxyRefused(
                    ErrorCode.MALFORMED_REQUEST,
                    f"headers[{index}]: header '{header.name[:40]}' is given twice; the hub "
                    "carries one value per header name.",
                )
            headers[header.name] = _header_text(index, header.value)
    return IncomingRecord(
        value=_data("value", request.value),
        key=_data("key", request.key),
        headers=headers,
        timestamp=request.timestamp,
    )


_PLAIN_RECORD_KEYS = frozenset({"value", "key", "timestamp"})
_PLAIN_DATA_KEYS = frozenset({"data", "type"})
_NOT_PLAIN: Any = object()


def _plain_record(document: Any) -> IncomingRecord | None:
    """A record in the common shape (`value` and `key` as `{"data"}`, of type `JSON` or none,
    no headers), read without the model; None for anything else, which the model reads and
    words the errors of, as `plain_records` does for the feed route."""
    if type(document) is not dict or not _PLAIN_RECORD_KEYS.issuperset(document):
        return None
    value = _plain_data(document.get("value"))
    key = _plain_data(document.get("key"))
    timestamp = document.get("timestamp")
    if value is _NOT_PLAIN or key is _NOT_PLAIN:
        return None
    if not (timestamp is None or type(timestamp) is int or type(timestamp) is str):
        return None
    return IncomingRecord(value, key, None, timestamp)


def _plain_data(data: Any) -> Any:
    if data is None:
        return None
    if type(data) is not dict or not _PLAIN_DATA_KEYS.issuperset(data):
        return _NOT_PLAIN
    if data.get("type", "JSON") != "JSON":
        return _NOT_PLAIN
    return data.get("data")


def _data(side: str, data: ProduceDataV3In | None) -> Any:
    if data is None:
        return None
    if data.type is not None and data.type.upper() != "JSON":
        raise ProxyRefused(
            ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            f"{side}.type '{data.type[:20]}' is not supported: send `JSON` (or no type), the "
            "data in natural JSON; the hub checks it against the feed's schema and writes Avro.",
        )
    named = [name.rstrip("_") for name in _SCHEMA_FIELDS if getattr(data, name) is not None]
    if named:
        raise ProxyRefused(
            ErrorCode.MALFORMED_REQUEST,
            f"{side}.{named[0]}: the hub checks records against the feed's latest schema and "
            "takes no schema with them. Leave out subject, subject_name_strategy, schema_id, "
            "schema_version and schema.",
        )
    return data.data


def _header_text(index: int, value: str | None) -> str:
    """A header's value: base64 of UTF-8 text, as hub headers are text."""
    try:
        return base64.b64decode(value or "", validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise ProxyRefused(
            ErrorCode.MALFORMED_REQUEST,
            f"headers[{index}].value: expected base64 of UTF-8 text (hub headers are text).",
        ) from None


def _iso(epoch_ms: int) -> str:
    moment = datetime.fromtimestamp(epoch_ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _json(text: str) -> str:
    """`text` as a JSON string, quotes and escapes included."""
    return to_json(text).decode()


def _line(report: dict[str, Any]) -> bytes:
    """A report as concatenated JSON: one object a line."""
    return to_json(report) + b"\n"
