"""Reading a batch of records from a request body: JSON, within the record limit, in shape."""

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import from_json

from hub_api.errors import MalformedBody, TooManyRecords
from hub_api.limits import DEFAULT_MAX_DEPTH, check_depth

M = TypeVar("M", bound=BaseModel)


def parse_batch(
    raw: bytes, model: type[M], *, max_records: int, max_depth: int = DEFAULT_MAX_DEPTH
) -> M:
    """The body as `model`; 40001 for bad JSON, shape or nesting, 42224 past `max_records`.

    The record count is checked before validation, so an oversized batch costs no validation.
    """
    document = load_json(raw, max_depth=max_depth)
    check_count(document, max_records)
    return validate(document, model)


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
