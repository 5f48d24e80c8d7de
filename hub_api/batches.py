"""Reading a batch of records from a request body: JSON, within the record limit, in shape."""

import json
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from registry.errors import ErrorCode, TerminalError

M = TypeVar("M", bound=BaseModel)


class MalformedBody(TerminalError):
    code = ErrorCode.MALFORMED_REQUEST


class TooManyRecords(TerminalError):
    code = ErrorCode.TOO_MANY_RECORDS


def parse_batch(raw: bytes, model: type[M], *, max_records: int) -> M:
    """The body as `model`; 40001 for bad JSON or shape, 42224 past `max_records`.

    The record count is checked before validation, so an oversized batch costs no validation.
    """
    try:
        document = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise MalformedBody(f"Malformed JSON body: {exc}.") from exc
    records = document.get("records") if isinstance(document, dict) else None
    if isinstance(records, list) and len(records) > max_records:
        raise TooManyRecords(
            f"{len(records)} records in one request; the most allowed is {max_records} "
            "(HUB_API_MAX_RECORDS_PER_REQUEST). Split the batch."
        )
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}"
            for err in exc.errors()
        )
        raise MalformedBody(f"Malformed request: {problems}") from exc
