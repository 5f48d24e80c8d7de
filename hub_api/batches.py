"""Reading a batch of records from a request body: JSON, within the record limit, in shape."""

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import from_json

from hub_api.errors import MalformedBody, TooManyRecords, UnsupportedMediaType
from hub_api.limits import DEFAULT_MAX_DEPTH, check_depth
from hub_api.publish_models import RecordsIn
from publish.publisher import IncomingRecord

M = TypeVar("M", bound=BaseModel)


JSON_MEDIA_TYPES = ("application/json", "application/vnd.hub.v1+json")
_BODY_KEYS = frozenset({"records", "schema_version"})
_RECORD_KEYS = frozenset({"value", "key", "headers", "timestamp"})


def parse_batch(
    raw: bytes, model: type[M], *, max_records: int, max_depth: int = DEFAULT_MAX_DEPTH
) -> M:
    """The body as `model`; 40001 for bad JSON, shape or nesting, 42224 past `max_records`.

    The record count is checked before validation, so an oversized batch costs no validation.
    """
    document = load_json(raw, max_depth=max_depth)
    check_count(document, max_records)
    return validate(document, model)


def parse_publish_body(
    raw: bytes, *, content_type: str, max_records: int, max_depth: int = DEFAULT_MAX_DEPTH
) -> tuple[list[IncomingRecord], int | None]:
    """The records of a publish body (`RecordsIn`) and its pinned `schema_version`, if any.

    41501 unless `content_type` is JSON, 40001 for bad JSON or shape, 42224 past `max_records`.
    A body already in the plain shape (the common case) skips the per-record models.
    """
    media_type = content_type.split(";")[0].strip().lower()
    if media_type not in JSON_MEDIA_TYPES:
        raise UnsupportedMediaType(
            f"Content-Type '{media_type or '(none)'}' is not supported; send application/json."
        )
    document = load_json(raw, max_depth=max_depth)
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


def load_json(raw: bytes, *, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """The body's JSON document; 40001 if it is not JSON or nests deeper than `max_depth`.

    pydantic-core's reader parses several times faster than `json.loads` and gives the same
    values; what it refuses (a lone surrogate escape, a byte order mark) is read again by
    `json.loads`, so a body is accepted, and an error worded, exactly as `json.loads` would.
    The nesting is checked first, without recursion: `json.loads` recurses once per level.
    """
    check_depth(raw, max_depth)
    try:
        return from_json(raw)
    except ValueError:
        pass
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise MalformedBody(f"Malformed JSON body: {exc}.") from exc
    except RecursionError:  # unbalanced brackets `check_depth` leaves to the parser
        raise MalformedBody("Malformed JSON body: nested too deeply.") from None


def check_count(document: Any, max_records: int) -> None:
    """42224 past `max_records`, checked before validation so an oversized batch costs none."""
    records = document.get("records") if isinstance(document, dict) else None
    if isinstance(records, list) and len(records) > max_records:
        raise TooManyRecords(
            f"{len(records)} records in one request; the most allowed is {max_records} "
            "(HUB_API_MAX_RECORDS_PER_REQUEST). Split the batch."
        )


def plain_records(document: Any) -> "tuple[list[IncomingRecord], int | None] | None":
    """The records and `schema_version` of a publish body already in the plain shape.

    A body whose every part already has the exact type `RecordsIn` would produce (the common
    case) needs no model per record; anything else returns None, and the caller validates with
    the model, which converts what it may and words the errors.
    """
    if type(document) is not dict or not _BODY_KEYS.issuperset(document):
        return None
    records = document.get("records")
    version = document.get("schema_version")
    if type(records) is not list or not records or not (version is None or type(version) is int):
        return None
    out = []
    for record in records:
        if type(record) is not dict or "value" not in record or not _RECORD_KEYS.issuperset(record):
            return None
        headers = record.get("headers")
        timestamp = record.get("timestamp")
        if headers is not None and not (
            type(headers) is dict
            and all(type(k) is str and type(v) is str for k, v in headers.items())
        ):
            return None
        if not (timestamp is None or type(timestamp) is int or type(timestamp) is str):
            return None
        out.append(IncomingRecord(record["value"], record.get("key"), headers, timestamp))
    return out, version


def validate(document: Any, model: type[M]) -> M:
    """The document as `model`; 40001 naming every problem if it does not fit."""
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}"
            for err in exc.errors()
        )
        raise MalformedBody(f"Malformed request: {problems}") from exc
