"""A publish body's records (`RecordsIn`): a body already in the plain shape, the common case,
is read without a model per record."""

from typing import Any

from hub_api.batches import check_count, load_json, validate
from hub_api.errors import UnsupportedMediaType
from hub_api.gateway.models import RecordsIn
from hub_api.limits import DEFAULT_MAX_DEPTH
from publish.publisher import IncomingRecord

JSON_MEDIA_TYPES = ("application/json", "application/vnd.hub.v1+json")
_BODY_KEYS = frozenset({"records", "schema_version"})
_RECORD_KEYS = frozenset({"value", "key", "headers", "timestamp"})


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
