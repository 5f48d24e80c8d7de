"""The JSON nesting limit: measured without recursion, before a body is parsed."""

import json
from typing import Any

import pytest

from hub_api.batches import load_json
from hub_api.errors import MalformedBody
from hub_api.limits import json_depth_exceeds

pytestmark = pytest.mark.unit


def _depth(document: Any) -> int:
    if isinstance(document, list):
        return 1 + max((_depth(item) for item in document), default=0)
    if isinstance(document, dict):
        return 1 + max((_depth(item) for item in document.values()), default=0)
    return 0


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        "[[]]",
        '{"a": "[[[[[[[[["}',
        '{"a\\\\": [["\\"[[", {"b": []}]]}',
        '"\\\\\\"[[{{"',
        '[{"x": [{}]}, [[[]]]]',
        '{"records": [{"value": {"a": [1, 2, {"b": "}}]]"}]}}]}',
    ],
)
def test_the_depth_is_measured_exactly_and_brackets_in_strings_do_not_count(text: str) -> None:
    depth = _depth(json.loads(text))

    assert not json_depth_exceeds(text.encode(), depth)
    assert depth == 0 or json_depth_exceeds(text.encode(), depth - 1)


def test_a_hundred_thousand_nested_arrays_are_refused_with_the_setting_named() -> None:
    with pytest.raises(MalformedBody, match="HUB_API_MAX_JSON_DEPTH") as refused:
        load_json(b"[" * 100_000 + b"]" * 100_000, max_depth=64)
    assert refused.value.code == 40001


def test_unbalanced_deep_brackets_are_malformed_json_not_a_recursion_error() -> None:
    with pytest.raises(MalformedBody):
        load_json(b"[" * 100_000, max_depth=64)
    with pytest.raises(MalformedBody):
        load_json(b'{"a": ' * 50_000, max_depth=64)


def test_a_body_at_the_limit_is_read() -> None:
    assert _depth(load_json(b"[" * 64 + b"]" * 64, max_depth=64)) == 64
