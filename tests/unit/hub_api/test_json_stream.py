"""Records streamed as concatenated JSON are read as they complete, whatever the chunking."""

import json

import pytest

from hub_api.batches import JsonStream
from hub_api.errors import MalformedBody

pytestmark = pytest.mark.unit

RECORDS = [{"value": {"n": n, "text": 'é "}{" \\'}} for n in range(4)]


def test_values_split_anywhere_between_chunks_come_out_once_and_in_order() -> None:
    data = "\n".join(json.dumps(r, ensure_ascii=False) for r in RECORDS).encode()
    for size in (1, 3, 7, len(data)):
        stream = JsonStream()
        values = []
        for start in range(0, len(data), size):  # cuts inside strings and inside `é`
            values += stream.feed(data[start : start + size])
        stream.end()
        assert values == RECORDS


def test_text_that_is_no_json_ends_the_stream_after_the_values_before_it() -> None:
    stream = JsonStream()
    assert stream.feed(b'{"value": 1} {"value": nope} {"value": 2}') == [{"value": 1}]
    assert stream.failed is not None
    with pytest.raises(MalformedBody):
        stream.feed(b'{"value": 3}')


def test_a_stream_that_stops_inside_a_value_is_malformed() -> None:
    stream = JsonStream()
    assert stream.feed(b'{"value": {"n": 1') == []
    with pytest.raises(MalformedBody, match="ended inside a record"):
        stream.end()


def test_nesting_past_the_limit_is_refused_before_parsing() -> None:
    with pytest.raises(MalformedBody, match="nest deeper"):
        JsonStream(max_depth=3).feed(b'{"a": [[[[1]]]]}')
