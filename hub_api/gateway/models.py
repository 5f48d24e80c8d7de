"""Request and response models of the publish gateway, and its answer built without them."""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from publish.publisher import PublishOutcome, PublishResult


class RecordIn(BaseModel):
    """One record: a natural-JSON value, and optionally a key, headers and a timestamp."""

    model_config = ConfigDict(extra="forbid")

    value: Any = Field(description="The record; null is a tombstone (changelog feeds only).")
    key: Any = Field(default=None, description="Keyed feeds: derived from the value if left out.")
    headers: dict[str, str] | None = Field(default=None, description="Kafka headers (text).")
    timestamp: int | str | None = Field(
        default=None, description="Event time: ISO-8601 or epoch milliseconds."
    )


class RecordsIn(BaseModel):
    """Body of `POST /v1/feeds/{topic}/records`."""

    model_config = ConfigDict(extra="forbid")

    records: list[RecordIn] = Field(min_length=1)
    schema_version: int | None = Field(
        default=None, description="Validate against this version instead of the latest."
    )


class ChangePublic(BaseModel):
    """A change cleaning made: which field, by which rule, from what to what."""

    path: str
    rule: str
    before: Any
    after: Any


class RecordResultPublic(BaseModel):
    """Per record: partition and offset, or an error code, message and field path."""

    partition: int | None = None
    offset: int | None = None
    error_code: int | None = None
    message: str | None = None
    path: str | None = None
    dead_lettered: bool | None = None
    cleaned: list[ChangePublic] | None = None


class PublishPublic(BaseModel):
    topic: str
    schema_id: int
    schema_version: int
    accepted: int
    rejected: int
    results: list[RecordResultPublic]


def publish_answer(topic: str, outcome: PublishOutcome) -> tuple[int, dict[str, object]]:
    """The status and body of a publish request, the body shaped as `PublishPublic`.

    200 when every record was accepted (or dead-lettered as asked), 207 when some were not, the
    first failure's status when none was. Built as plain dicts, for pydantic-core to render:
    per-record models cost more than everything else in the answer.
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
