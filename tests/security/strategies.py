"""Hypothesis strategies for the fuzzing: Avro schemas (valid and hostile) and publish bodies
whose values sit at and beyond the edges of their types.

The hostile ones are what a careless or malicious team sends: names Avro Java refuses, names
no column can hold, nesting and sizes over the limits, recursion, unions in unions, decimals
past any precision, numbers and timestamps beyond int64, NUL bytes.
"""

import json
from typing import Any

import hypothesis.strategies as st

from tests.security.conftest import ORDER, ORDER_V2

_NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
_BAD_NAME = st.sampled_from(["a b", "a\x00b", "9lives", "é", "", "x" * 300, "_hub_x", "a-b"])
_PRIMITIVE = st.sampled_from(["null", "boolean", "int", "long", "float", "double", "string"])
INT64 = 2**63


def _record(fields: list[dict[str, Any]], name: str = "R") -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": fields}


def _nested(depth: int) -> dict[str, Any]:
    node: Any = "string"
    for level in range(depth):
        node = _record([{"name": "f", "type": node}], name=f"N{level}")
    return node  # type: ignore[no-any-return]


@st.composite
def _valid(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(_NAME, min_size=1, max_size=5, unique_by=str.casefold))
    names = [n for n in names if not n.casefold().startswith("_hub_")] or ["f"]
    return _record([{"name": n, "type": draw(_PRIMITIVE)} for n in names])


def _hostile() -> st.SearchStrategy[Any]:
    decimal = {"type": "bytes", "logicalType": "decimal", "precision": 10**6, "scale": 2}
    return st.one_of(
        _BAD_NAME.map(lambda name: _record([{"name": name, "type": "int"}])),
        _BAD_NAME.map(lambda name: _record([{"name": "f", "type": "int"}], name=name)),
        st.integers(33, 200).map(_nested),
        st.integers(1001, 5000).map(
            lambda n: {"type": "enum", "name": "E", "symbols": [f"S{i}" for i in range(n)]}
        ),
        st.just(_record([{"name": "a", "type": "int"}, {"name": "A", "type": "int"}])),
        st.just(_record([{"name": "u", "type": ["null", ["int", "string"]]}])),
        st.just(_record([{"name": "u", "type": ["int", "int"]}])),
        st.just(_record([{"name": "next", "type": ["null", "R"]}])),
        st.just(_record([{"name": "d", "type": decimal}])),
        st.just(_record([{"name": "n", "type": "long", "default": INT64}])),
        st.just({"type": "fixed", "name": "F", "size": 2**62}),
        st.just({"type": "record", "name": "x" * 100_000, "fields": []}),
    )


@st.composite
def avro_schemas(draw: st.DrawFn) -> str:
    """Schema text: the feeds' own schemas, random valid records, hostile schemas, or not JSON."""
    choice = draw(st.sampled_from(["own", "valid", "hostile", "hostile", "text"]))
    if choice == "own":
        return json.dumps(draw(st.sampled_from([ORDER, ORDER_V2])))
    if choice == "valid":
        return json.dumps(draw(_valid()))
    if choice == "hostile":
        return json.dumps(draw(_hostile()))
    return draw(st.sampled_from(['"string"', "{", "[]", "null", '{"type": "nope"}', "\x00"]))


_LONG = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([INT64, -INT64 - 1, 2**64, 10**30, 1.5, "12", None, True]),
)
_TIMESTAMP = st.sampled_from(
    [
        1714564800000,
        0,
        -1,
        INT64 - 1,
        INT64,
        2**64,
        4102444800000,
        253402300799999,
        "9999-12-31T23:59:59Z",
        "2100-01-01T00:00:00Z",
        "0001-01-01T00:00:00Z",
        "not a time",
        1.5,
    ]
)
_TEXT = st.one_of(st.text(max_size=20), st.sampled_from(["nul\x00", "x" * 2_000_000]))


@st.composite
def _record_in(draw: st.DrawFn) -> dict[str, Any]:
    record: dict[str, Any] = {"value": {"id": draw(_TEXT), "cents": draw(_LONG)}}
    if draw(st.booleans()):
        record["timestamp"] = draw(_TIMESTAMP)
    if draw(st.booleans()):
        record["headers"] = draw(st.dictionaries(_TEXT, _TEXT, max_size=2))
    if draw(st.booleans()):
        record["key"] = draw(st.one_of(_TEXT, st.integers(), st.none()))
    return record


@st.composite
def publish_bodies(draw: st.DrawFn, *, rest_proxy: bool) -> dict[str, Any]:
    """A publish body for the feeds' schema, with values at and beyond their types' edges."""
    records = draw(st.lists(_record_in(), min_size=1, max_size=3))
    if not rest_proxy:
        return {"records": records}
    body: dict[str, Any] = {"records": [{"value": r["value"]} for r in records]}
    if draw(st.booleans()):
        body["value_schema_id"] = draw(st.sampled_from([1, 2, 2**31, INT64, -1]))
    else:
        body["value_schema"] = draw(avro_schemas())
    return body
