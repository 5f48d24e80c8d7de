"""Records of a streamed body of concatenated JSON (`{...}{...}`), found as the chunks arrive.

The REST Proxy v3 produce stream sends its records one after another, in chunks cut anywhere:
inside a string, inside an escape, inside a UTF-8 character. `RecordSplitter` tells where each
record ends by looking at each byte once: it keeps its state across chunks (nesting depth,
inside a string, after a backslash) and never scans a pending record again, so a chunk costs
time in proportion to its own size, whatever came before it. The bytes between the structural
ones (brackets outside strings, quotes and backslashes inside them) are passed over by C loops
(`re`, and `bytes.find` inside a string that spans chunks), so a megabyte costs milliseconds
(bench/record_stream.py). A record's text is parsed once, when it is complete (`parse_records`).

Each record's text is bounded by the record-size limit (`HUB_KAFKA_MAX_RECORD_BYTES`): past
it, its bytes are no longer kept, only counted, and the record is answered 41302 in its place
while the stream goes on. Nesting past `HUB_API_MAX_JSON_DEPTH`, or text that cannot start a
record, ends the stream (40001), as text that is not JSON does in Confluent's REST Proxy:
nothing after it can be read reliably.
"""

import json
import re
from typing import Any

from pydantic_core import from_json

from hub_api.errors import MalformedBody, RecordTextTooLarge
from hub_api.limits import DEFAULT_MAX_DEPTH
from publish.publisher import DEFAULT_MAX_RECORD_BYTES

_NOT_SPACE = re.compile(rb"[^ \t\r\n]")
# Inside a record, up to its next bracket outside strings: runs of other bytes and whole strings
# with their escapes, in one pass of C. A string still open at the chunk's end is taken to that
# end, so the skip's group, the last string's end, is its closing quote, or at the chunk's end
# empty or a backslash (the chunk ended inside the string, or inside an escape).
_SKIP = rb'(?:[^][{}"]++|"(?:[^"\\]++|\\.)*+("|\\?\Z))*+'
# How many opening brackets one step takes, each with the skip after it: a record's openers
# (`{"value": {"data": {`) come a few in a row, so that one step of `_STEP` reads most records.
_OPENERS_A_STEP = 4
# A step: a skip, up to `_OPENERS_A_STEP` opening brackets each followed by a skip, then a run of
# closing brackets (`}}}`, which often ends a record). Groups, in order: the first skip's string
# end, then per opener the bracket and its skip's string end, then the closing run. Every part
# is possessive or optional without going back, so no byte is looked at twice.
_OPENERS = b""
for _ in range(_OPENERS_A_STEP):
    _OPENERS = rb"(?:([\[{])" + _SKIP + _OPENERS + rb")?+"
_STEP = re.compile(_SKIP + _OPENERS + rb"([\]}]++)?", re.DOTALL)
_CLOSING_GROUP = 2 + 2 * _OPENERS_A_STEP
# The rest of a string an earlier chunk opened, likewise.
_STRING_REST = re.compile(rb'(?:[^"\\]++|\\.)*+("|\\?\Z)', re.DOTALL)
_OPENING = frozenset(b"[{")


class RecordSplitter:
    """Splits a stream of concatenated JSON texts into the texts of its records.

    `feed(chunk)` answers, in order, the text of each record the chunk completed, or a
    `RecordTextTooLarge` in the place of a record over `max_record_bytes`. After a `MalformedBody`
    (nesting too deep, text that is no record), every later call raises it again.
    """

    def __init__(
        self,
        *,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    ) -> None:
        self._max_depth = max_depth
        self._max_record_bytes = max_record_bytes
        self._depth = 0  # 0: between records
        self._in_string = False
        self._escaped = False  # the last byte seen was a backslash inside a string
        self._parts: list[bytes] = []  # the pending record's bytes from earlier chunks
        self._size = 0  # the pending record's bytes so far, kept or not
        self._seen = 0  # bytes of the stream before the current chunk, for messages
        self._failed: MalformedBody | None = None

    def feed(self, chunk: bytes) -> list[bytes | RecordTextTooLarge]:
        """The records `chunk` completed, in order."""
        if self._failed is not None:
            raise self._failed
        try:
            return self._split(chunk)
        except MalformedBody as exc:
            self._failed = exc
            raise
        finally:
            self._seen += len(chunk)

    def end(self) -> None:
        """The stream ended: 40001 if it stopped inside a record."""
        if self._failed is not None:
            raise self._failed
        if self._depth:
            start = b"".join(self._parts)[:60].decode("utf-8", "replace")
            raise MalformedBody(
                f"Malformed JSON stream: it ended inside a record: {start!r}. Send each "
                "record whole."
            )

    def _split(self, chunk: bytes) -> list[bytes | RecordTextTooLarge]:
        records: list[bytes | RecordTextTooLarge] = []
        size = len(chunk)
        position = 0
        start = 0  # where the pending record's bytes begin in this chunk
        if self._in_string and size:
            position = self._string_rest(chunk)
        depth = self._depth  # a local: the loop below runs about once per record
        step_at = _STEP.match
        while position < size and not self._in_string:
            if not depth:
                found = _NOT_SPACE.search(chunk, position)
                if found is None:
                    break  # only whitespace up to the chunk's end
                position = start = found.start()
                if chunk[start] not in _OPENING:
                    raise self._not_a_record(chunk, start)
            step = step_at(chunk, position)
            assert step is not None  # it matches the empty string at least
            position = step.end()
            openers = _OPENERS_A_STEP  # groups 2, 4, ...: those that matched come first
            while openers and step.start(2 * openers) < 0:
                openers -= 1
            if openers:
                depth += openers
                if depth > self._max_depth:
                    raise self._too_deep(step.start(2 * (openers - depth + self._max_depth + 1)))
            if step.start(_CLOSING_GROUP) >= 0:
                closing = position - step.start(_CLOSING_GROUP)
                if closing < depth:
                    depth -= closing
                    continue
                position -= closing - depth  # the rest is after the record
                depth = 0
                records.append(self._complete(chunk[start:position]))
                start = position
            elif position == size:  # the last skip's string end tells whether it is open
                end = 2 * openers + 1
                if step.end(end) == size and step.group(end) != b'"':
                    self._in_string = True
                    self._escaped = step.group(end) == b"\\"
        self._depth = depth
        if depth:
            self._keep(chunk[start:])
        return records

    def _too_deep(self, at: int) -> MalformedBody:
        return MalformedBody(
            f"Malformed JSON stream: arrays and objects nest deeper than {self._max_depth} "
            f"levels (HUB_API_MAX_JSON_DEPTH) at byte {self._seen + at}."
        )

    def _string_rest(self, chunk: bytes) -> int:
        """Go on with a string an earlier chunk opened; where it ends in `chunk`.

        A long string spans many chunks, so its bytes go to `bytes.find` (memchr) for the next
        quote; only the backslashes right before it are looked at again, to tell a closing quote
        from an escaped one. From an escaped quote on, `re` reads the string, escapes in C.
        """
        size = len(chunk)
        position = 0
        if self._escaped:
            self._escaped = False
            position = 1  # the escaped byte, whatever it is
        quote = chunk.find(b'"', position)
        end = size if quote == -1 else quote
        backslashes = 0  # right before the quote, or the chunk's end
        while end - backslashes > position and chunk[end - backslashes - 1] == 0x5C:
            backslashes += 1
        if quote == -1:
            self._escaped = backslashes % 2 == 1
            return size
        if backslashes % 2 == 0:
            self._in_string = False
            return quote + 1
        rest = _STRING_REST.match(chunk, quote + 1)
        assert rest is not None  # it matches at the chunk's end at least
        if rest.group(1) == b'"':
            self._in_string = False
        else:
            self._escaped = rest.group(1) == b"\\"
        return rest.end()

    def _keep(self, piece: bytes) -> None:
        """Keep the pending record's bytes of this chunk, up to the record-size limit."""
        self._size += len(piece)
        if self._size <= self._max_record_bytes:
            self._parts.append(piece)
        else:
            self._parts.clear()  # only counted from here on: the record will be refused

    def _complete(self, piece: bytes) -> bytes | RecordTextTooLarge:
        size = self._size + len(piece)
        text = b"".join((*self._parts, piece)) if self._parts else piece
        self._parts.clear()
        self._size = 0
        if size > self._max_record_bytes:
            return RecordTextTooLarge(size, self._max_record_bytes)
        return text

    def _not_a_record(self, chunk: bytes, position: int) -> MalformedBody:
        found = chunk[position : position + 20].decode("utf-8", "replace")
        return MalformedBody(
            f"Malformed JSON stream: expected a record (a JSON object) at byte "
            f"{self._seen + position}, found {found!r}. Send records as JSON objects, one "
            "after another."
        )


def parse_records(
    texts: list[bytes | RecordTextTooLarge],
) -> tuple[list[Any], MalformedBody | None]:
    """Each record's JSON value (a `RecordTextTooLarge` stays in its place), up to the first
    text that is not JSON, and that text's 40001 error, which ends the stream.

    pydantic-core's reader first, several times faster than `json.loads`; what it refuses (a
    lone surrogate escape) is read again by `json.loads`, so a record is accepted, and an error
    worded, as for a publish body (`hub_api.batches.load_json`).
    """
    values: list[Any] = []
    for text in texts:
        if isinstance(text, RecordTextTooLarge):
            values.append(text)
            continue
        try:
            values.append(from_json(text))
            continue
        except ValueError:
            pass
        try:
            values.append(json.loads(text))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return values, MalformedBody(f"Malformed JSON stream: record {len(values)}: {exc}.")
        except RecursionError:
            return values, MalformedBody("Malformed JSON stream: nested too deeply.")
    return values, None
