"""Records streamed as concatenated JSON are found as they complete, whatever the chunking, each
byte looked at once, each record bounded by the record-size limit."""

import json
import random
from typing import Any

import pytest

from hub_api.errors import MalformedBody, RecordTextTooLarge
from hub_api.rest_proxy.record_stream import RecordSplitter, parse_records

pytestmark = pytest.mark.unit

# Strings holding brackets, escaped quotes and backslashes, an escaped quote last in a string,
# `\u` escapes, a two-byte character and nesting: every state the splitter keeps across chunks.
RECORDS: list[Any] = [
    {"value": {"n": 0, "text": 'é "}{" \\'}},
    {"value": {"n": 1, "text": '[[{\\"', "list": [[{"a": "]"}], [], {}]}},
    {"value": {"n": 2, "text": '\u2028 \\u0041 " ends with a quote"'}},
    [{"a": 1}, "]"],
    {"value": None, "key": {"data": "} ]"}},
]
BODY = " \r\n\t".join(json.dumps(r, ensure_ascii=False) for r in RECORDS).encode() + b"\n "


def _split(splitter: RecordSplitter, chunks: list[bytes]) -> list[Any]:
    texts: list[bytes | RecordTextTooLarge] = []
    for chunk in chunks:
        texts += splitter.feed(chunk)
    splitter.end()
    values, failed = parse_records(texts)
    assert failed is None
    return values


def test_records_cut_in_two_at_every_byte_come_out_whole_once_and_in_order() -> None:
    for cut in range(len(BODY) + 1):
        assert _split(RecordSplitter(), [BODY[:cut], BODY[cut:]]) == RECORDS, cut


@pytest.mark.parametrize("size", [1, 2, 3, 7, 4096])
def test_records_in_chunks_of_any_size_come_out_whole_once_and_in_order(size: int) -> None:
    chunks = [BODY[start : start + size] for start in range(0, len(BODY), size)]

    assert _split(RecordSplitter(), [b"", *chunks, b""]) == RECORDS


def test_a_record_completed_by_a_chunk_is_answered_by_that_chunk() -> None:
    splitter = RecordSplitter()
    first = json.dumps(RECORDS[0]).encode()

    assert splitter.feed(first[:-1]) == []
    assert splitter.feed(first[-1:] + b" {") == [first]
    assert splitter.feed(b'"value": 1}') == [b'{"value": 1}']


def test_a_record_over_the_limit_is_answered_in_its_place_and_the_stream_goes_on() -> None:
    big = json.dumps({"value": {"text": "x" * 200}}).encode()
    small = b'{"value": 1}'
    splitter = RecordSplitter(max_record_bytes=100)
    body = small + big + small
    texts: list[bytes | RecordTextTooLarge] = []
    for start in range(0, len(body), 16):
        texts += splitter.feed(body[start : start + 16])
    splitter.end()

    assert [texts[0], texts[2]] == [small, small]
    refused = texts[1]
    assert isinstance(refused, RecordTextTooLarge)
    assert refused.code == 41302
    assert f"{len(big)} bytes" in refused.message
    assert "HUB_KAFKA_MAX_RECORD_BYTES" in refused.message


def test_a_record_exactly_at_the_limit_is_read() -> None:
    record = b'{"value": "' + b"x" * 50 + b'"}'

    assert RecordSplitter(max_record_bytes=len(record)).feed(record) == [record]


def test_text_that_is_no_record_ends_the_stream_after_the_records_before_it() -> None:
    splitter = RecordSplitter()

    with pytest.raises(MalformedBody, match=r"expected a record .* at byte 13, found 'nope"):
        splitter.feed(b'{"value": 1} nope {"value": 2}')
    with pytest.raises(MalformedBody):
        splitter.feed(b'{"value": 3}')


def test_a_record_whose_text_is_not_json_ends_the_stream_after_the_ones_before_it() -> None:
    texts = RecordSplitter().feed(b'{"value": 1} {"value": nope} {"value": 2}')

    values, failed = parse_records(texts)

    assert values == [{"value": 1}]
    assert failed is not None
    assert "record 1" in failed.message


def test_a_stream_that_stops_inside_a_record_is_malformed() -> None:
    splitter = RecordSplitter()
    assert splitter.feed(b'{"value": {"n": "1') == []

    with pytest.raises(MalformedBody, match="ended inside a record"):
        splitter.end()


def test_nesting_past_the_limit_ends_the_stream_as_it_arrives() -> None:
    splitter = RecordSplitter(max_depth=3)
    assert splitter.feed(b'{"a": [[') == []

    with pytest.raises(MalformedBody, match="nest deeper than 3 levels"):
        splitter.feed(b"[1]]]}")


def test_brackets_inside_strings_do_not_count_towards_nesting() -> None:
    record = b'{"a": "[[[[[[[[{{{{{{{{\\"[[[["}'

    assert RecordSplitter(max_depth=1).feed(record) == [record]


def test_strings_of_quotes_backslashes_and_brackets_split_anywhere_read_as_json_reads_them() -> (
    None
):
    generator = random.Random(7)  # the same strings every run
    alphabet = ['"', "\\", "{", "}", "[", "]", " ", "a", "é"]
    records = [
        {"value": {"text": "".join(generator.choices(alphabet, k=generator.randint(0, 300)))}}
        for _ in range(200)
    ]
    body = "".join(json.dumps(r, ensure_ascii=False) for r in records).encode()

    for size in (1, 2, 5, 64, 1000):
        chunks = [body[start : start + size] for start in range(0, len(body), size)]
        assert _split(RecordSplitter(), chunks) == records, size
