"""The publish answer: 200, 207 or the failure's status, and a result per record in order."""

import pytest

from hub_api.gateway.models import PublishPublic, publish_answer
from hub_core.errors import ErrorCode
from publish.publisher import PublishOutcome, PublishResult
from registry.cleaning import Change
from registry.cleaning_rules import Rule
from registry.types import SchemaId, Version

pytestmark = pytest.mark.unit


def _answer(*results: PublishResult) -> tuple[int, dict[str, object]]:
    return publish_answer("sales.orders", PublishOutcome(SchemaId(7), Version(2), list(results)))


def _invalid(path: str = "$.qty") -> PublishResult:
    return PublishResult(error_code=ErrorCode.INVALID_RECORD, message=f"{path}: bad", path=path)


def test_every_record_accepted_is_200_with_where_each_was_stored() -> None:
    status, body = _answer(PublishResult(0, 10), PublishResult(1, 4))

    assert status == 200
    assert body == {
        "topic": "sales.orders",
        "schema_id": 7,
        "schema_version": 2,
        "accepted": 2,
        "rejected": 0,
        "results": [{"partition": 0, "offset": 10}, {"partition": 1, "offset": 4}],
    }


def test_some_records_refused_is_207_with_each_ones_code_message_and_path() -> None:
    status, body = _answer(PublishResult(0, 10), _invalid())

    assert status == 207
    assert (body["accepted"], body["rejected"]) == (1, 1)
    assert body["results"] == [
        {"partition": 0, "offset": 10},
        {"error_code": 42220, "message": "$.qty: bad", "path": "$.qty"},
    ]


def test_every_record_refused_answers_with_the_first_failures_status() -> None:
    unavailable = PublishResult(error_code=ErrorCode.KAFKA_UNAVAILABLE, message="retry")

    assert _answer(_invalid(), unavailable)[0] == 422
    assert _answer(unavailable, _invalid())[0] == 503


def test_records_dead_lettered_as_asked_still_make_a_200() -> None:
    dead = PublishResult(
        error_code=ErrorCode.INVALID_RECORD, message="bad", path="$.qty", dead_lettered=True
    )
    status, body = _answer(PublishResult(0, 1), dead)

    assert status == 200
    assert (body["accepted"], body["rejected"]) == (1, 1)
    assert body["results"][1]["dead_lettered"] is True  # type: ignore[index]


def test_what_cleaning_changed_is_reported_with_the_record() -> None:
    change = Change(path="$.name", rule=Rule.TRIM, before=" Ada ", after="Ada")
    _status, body = _answer(PublishResult(0, 3, cleaned=(change,)))

    assert body["results"] == [
        {
            "partition": 0,
            "offset": 3,
            "cleaned": [{"path": "$.name", "rule": "trim", "before": " Ada ", "after": "Ada"}],
        }
    ]


def test_the_answer_is_shaped_as_the_documented_model() -> None:
    _status, body = _answer(PublishResult(0, 10), _invalid())

    assert PublishPublic.model_validate(body).model_dump(exclude_none=True) == body
