"""Hostile input from the owner itself and from an admin gets a coded 4xx, never a 5xx and never
a hang, and changes nothing of either team.

The single cases of each class live in tests/integration/test_bad_input.py and the registry rules
tests; this table runs one of each class through every caller that is allowed to write, so a
check done only for team keys (or only for admins) shows up.
"""

import json
from dataclasses import dataclass
from typing import Any

import pytest

from tests.security.conftest import ORDER, Hub

pytestmark = pytest.mark.security

OWNER, OTHER = "sec_b", "sec_a"
INT64 = 2**63
FAR_FUTURE_MS = 253402300799999  # 9999-12-31T23:59:59.999Z: an int64, but no clock's now


def _deep(depth: int) -> Any:
    node: Any = "string"
    for level in range(depth):
        node = {"type": "record", "name": f"N{level}", "fields": [{"name": "f", "type": node}]}
    return node


def _deep_list(depth: int) -> Any:
    node: Any = []
    for _ in range(depth):
        node = [node]
    return node


def _schema(**changes: Any) -> dict[str, str]:
    return {"schema": json.dumps({**ORDER, **changes})}


def _field(name: str) -> dict[str, str]:
    return _schema(fields=[{"name": name, "type": "string"}])


@dataclass(frozen=True)
class Case:
    """A hostile request to `{topic}` (the owner's feed) or `{subject}` (its domain subject)."""

    id: str
    method: str
    path: str
    body: Any
    expected: tuple[int, int]


CASES = [
    Case(
        "deep-json",
        "POST",
        "/subjects/{subject}/versions",
        {"schema": _deep_list(500)},
        (400, 40001),
    ),
    Case(
        "deep-schema",
        "POST",
        "/subjects/{subject}/versions",
        {"schema": json.dumps(_deep(40))},
        (422, 42201),
    ),
    Case(
        "huge-enum",
        "POST",
        "/subjects/{subject}/versions",
        {
            "schema": json.dumps(
                {"type": "enum", "name": "E", "symbols": [f"S{i}" for i in range(5000)]}
            )
        },
        (422, 42201),
    ),
    Case("avro-name", "POST", "/subjects/{subject}/versions", _field("a b"), (422, 42201)),
    Case("nul-field-name", "POST", "/subjects/{subject}/versions", _field("a\x00b"), (422, 42201)),
    Case(
        "long-field-name", "POST", "/subjects/{subject}/versions", _field("f" * 256), (422, 42201)
    ),
    Case(
        "long-type-name",
        "POST",
        "/subjects/{subject}/versions",
        _schema(name="R" * 300),
        (422, 42201),
    ),
    Case("nul-subject", "POST", "/subjects/sec_b.a%00b-value/versions", _schema(), (422, 42208)),
    Case("control-subject", "PUT", "/config/sec_b.a%0Ab", {"compatibility": "NONE"}, (422, 42208)),
    Case("long-subject", "PUT", "/mode/sec_b." + "s" * 300, {"mode": "READONLY"}, (422, 42208)),
    Case("long-prefix", "GET", "/subjects?subjectPrefix=" + "p" * 300, None, (422, 42208)),
    Case(
        "nul-reference-subject",
        "POST",
        "/subjects/{subject}/versions",
        {**_schema(), "references": [{"name": "x.Y", "subject": "sec_b.\x00", "version": 1}]},
        (422, 42208),
    ),
    Case(
        "reference-version-int64",
        "POST",
        "/compatibility/subjects/{subject}/versions/latest",
        {**_schema(), "references": [{"name": "x.Y", "subject": "sec_b.t", "version": INT64}]},
        (422, 42202),
    ),
    Case("schema-id-int64", "GET", f"/schemas/ids/{INT64 - 1}/subjects", None, (404, 40403)),
    Case("version-int64", "GET", f"/subjects/{{subject}}/versions/{INT64}", None, (422, 42202)),
    Case("nul-feed-owner", "GET", "/v1/feeds?owner=sec_b%00", None, (200, 0)),
    Case("nul-topic", "POST", "/v1/feeds/sec_b.a%00b/records", {"records": []}, (404, 40420)),
    Case(
        "long-topic",
        "POST",
        "/v1/feeds",
        {
            "topic": "sec_b." + "t" * 300,
            "owner": OWNER,
            "kind": "event",
            "value_schema": json.dumps(ORDER),
        },
        (400, 40001),
    ),
]
# Per record: the batch is answered 207 and the good record is published.
RECORD_CASES = {
    "long-beyond-int64": ({"id": "x", "cents": INT64}, {}),
    "timestamp-beyond-int64": ({"id": "x", "cents": 1}, {"timestamp": INT64}),
    "timestamp-far-future": ({"id": "x", "cents": 1}, {"timestamp": FAR_FUTURE_MS}),
    "timestamp-far-future-text": ({"id": "x", "cents": 1}, {"timestamp": "9999-12-31T23:59:59Z"}),
    "nul-header": ({"id": "x", "cents": 1}, {"headers": {"h\x00": "v"}}),
}
CALLERS = (OWNER, "admin")


def _filled(hub: Hub, text: str) -> str:
    owner = hub.teams[OWNER]
    return text.replace("{topic}", owner.topic).replace("{subject}", owner.domain_subject)


@pytest.fixture(scope="module")
def untouched(hub: Hub) -> dict[str, Any]:
    return {team: hub.snapshot(team) for team in (OWNER, OTHER)}


@pytest.fixture(scope="module")
def other_rows(hub: Hub) -> list[tuple[Any, ...]]:
    """The other team's table before any hostile request."""
    assert hub.lake is not None
    return hub.lake.rows(hub.teams[OTHER].topic)


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_hostile_input_is_a_coded_4xx_that_changes_nothing(
    hub: Hub, untouched: dict[str, Any], other_rows: list[tuple[Any, ...]], caller: str, case: Case
) -> None:
    body = None if case.body is None else json.loads(_filled(hub, json.dumps(case.body)))
    answer = hub.call(caller, case.method, _filled(hub, case.path), body=body)

    status, code = case.expected
    assert answer.status_code == status, answer.text
    if code:
        assert answer.json()["error_code"] == code, answer.text
    assert {team: hub.snapshot(team) for team in (OWNER, OTHER)} == untouched


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("value,extra", RECORD_CASES.values(), ids=RECORD_CASES.keys())
def test_a_hostile_record_is_refused_alone_and_its_batch_is_published(
    hub: Hub, caller: str, value: dict[str, Any], extra: dict[str, Any]
) -> None:
    good = {"value": {"id": "ok", "cents": 1}}
    topic = hub.teams[OWNER].topic

    answer = hub.call(
        caller,
        "POST",
        f"/v1/feeds/{topic}/records",
        body={"records": [good, {"value": value, **extra}, good]},
    )

    assert answer.status_code == 207, answer.text
    first, refused, last = answer.json()["results"]
    assert refused["error_code"] == 42220, refused
    assert first["offset"] is not None and last["offset"] is not None


def test_after_all_hostile_input_the_loader_lands_nothing_new_for_the_other_team(
    hub: Hub, other_rows: list[tuple[Any, ...]]
) -> None:
    # Last in the module: the loader lands whatever the cases above put in Kafka.
    assert hub.rows(OTHER) == other_rows
