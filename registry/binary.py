"""Avro binary written straight from natural JSON, for values already in their datum's shape.

On the publish path most values arrive exactly as their datum: a `str` for a string, an `int`
in range for a long or a `timestamp-millis`, a `float` for a double, a `dict` holding exactly a
record's fields. For those, converting to a datum and handing it to fastavro walks the value
twice and pays fastavro's per-call set-up, which for small records costs more than the writing.
`direct_writer` compiles a schema, once, into closures that check each value's type and write
its Avro binary in the same walk.

Two types take their natural JSON text rather than their datum, because that text is what
publishers and connectors hold and turning it into the datum is the costly part:

- `bytes` and `fixed` (a `decimal` on a fixed included, which the general path also reads as
  bytes) take base64 text, decoded by the general path's own `convert_bytes`;
- a `decimal` on `bytes` takes an `int` or plain decimal text (`-?[0-9]+(.[0-9]+)?`, what
  PostgreSQL sends for a `numeric`), read exactly into its unscaled integer: never rounded. Text
  with more fraction digits than the scale (even zeros: `"1.50"` for scale 1) or more digits
  than the precision allows is not written; nor is any other spelling (an exponent, `"+1"`,
  spaces, `"NaN"`) or a `decimal.Decimal`, which the general path refuses. The bytes are
  fastavro's: the unscaled integer in big-endian two's complement, in one byte more than its
  magnitude's bit length needs (so -128 takes two bytes, as fastavro writes it).

Any value that is not exactly in shape (a missing field left to its default, an ISO-8601
timestamp, a number given as text, a value that is invalid) makes the writer give up on the
record by raising `NotDirect`; the caller then takes the general path (`CompiledSchema`:
conversion, then fastavro), which converts it or words its error. The writer therefore never
decides what is valid, only how to write what is plainly valid, and its bytes are fastavro's
(`tests/unit/registry/test_compiled.py` compares them on generated schemas and values).

Schemas with a type the writer does not handle (float, the logical types but decimals, the
integer timestamps and dates, unions other than a type and null, recursive records, a decimal
whose precision and scale the registry would refuse or of over 308 digits) get no direct
writer.

A record's writer is generated for its fields (`_record`): its nullable, string and integer
fields are written without a call of their own, and a field whose value is the one it wrote
last appends the bytes it kept: change events are records of many small fields, most of them
the same from one event to the next.
"""

import re
import struct
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from registry.avro import find_named, remember_named
from registry.errors import InvalidRecord, NotDirect
from registry.serde import convert_bytes

# Appends the Avro binary of a value to the buffer, or raises NotDirect.
Write = Callable[[bytearray, Any], None]

_LONG = (-(2**63), 2**63 - 1)
_INT = (-(2**31), 2**31 - 1)
_INTEGER_LOGICAL = {
    "timestamp-millis": ("long", _LONG),
    "timestamp-micros": ("long", _LONG),
    "local-timestamp-millis": ("long", _LONG),
    "local-timestamp-micros": ("long", _LONG),
    "date": ("int", _INT),
}
_SMALL = [bytes([n]) for n in range(128)]
_pack_double = struct.Struct("<d").pack
# Decimal text written directly; `Decimal()` takes more (exponents, signs, spaces, underscores,
# non-ASCII digits, NaN), which the general path reads.
_PLAIN_DECIMAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?").fullmatch
# Wider decimals get no direct writer: the general path refuses a value beyond a double's range
# (`math.isfinite` converts it), which a precision of 308 digits or fewer cannot reach. (The
# registry holds topic subjects to 38.)
_MAX_DECIMAL_PRECISION = 308


class _Unsupported(Exception):
    """The schema has a type the direct writer does not handle."""


def direct_writer(schema: Any) -> Write | None:
    """The direct writer of `schema` (parsed JSON, as `AvroSchema.resolved`), or None."""
    try:
        return _Compiler().write(schema, None)
    except _Unsupported:
        return None


def _write_long(out: bytearray, n: int) -> None:
    """Zig-zag, then base-128 varint: Avro's int and long."""
    n = (n << 1) ^ (n >> 63)
    if n < 128:
        out += _SMALL[n]
        return
    while n > 127:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


class _Compiler:
    def __init__(self) -> None:
        self._named: dict[str, Any] = {}
        self._open: set[int] = set()  # records being compiled: a reference back is recursion

    def write(self, schema: Any, ns: str | None) -> Write:
        if isinstance(schema, list):
            return self._union(schema, ns)
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return _PRIMITIVES[schema]
            named = find_named(self._named, schema, ns)
            if named is None:
                raise _Unsupported(schema)
            return self.write(named, ns)
        kind = schema["type"]
        if not isinstance(kind, str):
            return self.write(kind, ns)
        logical = schema.get("logicalType")
        if logical is not None:
            if logical in _INTEGER_LOGICAL and _INTEGER_LOGICAL[logical][0] == kind:
                return _integer(_INTEGER_LOGICAL[logical][1])
            if logical == "decimal" and kind == "bytes":
                return _decimal(*_precision_scale(schema))
            # The general path reads a decimal on a fixed as the fixed's bytes, as below.
            if logical == "decimal" and kind != "fixed":
                raise _Unsupported(logical)
            if logical in ("uuid", "time-millis", "time-micros", "duration"):
                raise _Unsupported(logical)
            # Any other logical type is ignored, as Avro says: the underlying type is written.
        if kind in _PRIMITIVES:
            return _PRIMITIVES[kind]
        if kind in ("record", "error"):
            return self._record(schema, self._remember(schema, ns))
        if kind == "enum":
            self._remember(schema, ns)
            return _enum(schema["symbols"])
        if kind == "fixed":
            self._remember(schema, ns)
            return _fixed(schema["size"])
        if kind == "array":
            return _array(self.write(schema["items"], ns))
        if kind == "map":
            return _map(self.write(schema["values"], ns))
        raise _Unsupported(kind)

    def _remember(self, schema: Mapping[str, Any], ns: str | None) -> str | None:
        return remember_named(self._named, schema, ns)

    def _record(self, schema: Mapping[str, Any], ns: str | None) -> Write:
        if id(schema) in self._open:
            raise _Unsupported("recursive record")
        self._open.add(id(schema))
        fields = tuple(_Field(f["name"], *self._field(f["type"], ns)) for f in schema["fields"])
        self._open.discard(id(schema))
        return _record(fields)

    def _field(self, schema: Any, ns: str | None) -> tuple[Write, tuple[bytes, bytes] | None]:
        """A field's writer; for a nullable field, its other branch's and the two tags."""
        if isinstance(schema, list):
            null_index = self._null_index(schema)
            return self.write(schema[1 - null_index], ns), _tags(null_index)
        return self.write(schema, ns), None

    def _union(self, branches: list[Any], ns: str | None) -> Write:
        null_index = self._null_index(branches)
        return _nullable(_tags(null_index), self.write(branches[1 - null_index], ns))

    @staticmethod
    def _null_index(branches: list[Any]) -> int:
        if len(branches) != 2 or "null" not in branches:
            raise _Unsupported("union")
        return branches.index("null")


class _Field(NamedTuple):
    name: str
    write: Write  # for a nullable field, the writer of its other branch
    tags: tuple[bytes, bytes] | None  # for a nullable field: the branch tags of null and other


def _tags(null_index: int) -> tuple[bytes, bytes]:
    """The union branch tags (zig-zag of 0 or 1) of null and of the other branch."""
    return _SMALL[null_index * 2], _SMALL[(1 - null_index) * 2]


def _null(out: bytearray, value: Any) -> None:
    if value is not None:
        raise NotDirect


def _boolean(out: bytearray, value: Any) -> None:
    if type(value) is not bool:
        raise NotDirect
    out += b"\x01" if value else b"\x00"


def _integer(bounds: tuple[int, int]) -> Write:
    """The writer of an int or long (or an integer logical type) within `bounds`; one per
    bounds, so that `_record` can recognise it and write the field in line."""
    known = _INTEGERS.get(bounds)
    if known is not None:
        return known
    low, high = bounds

    def integer(out: bytearray, value: Any) -> None:
        if type(value) is not int or not low <= value <= high:
            raise NotDirect
        # `_write_long`, inline: a call fewer for the commonest value of all
        n = (value << 1) ^ (value >> 63)
        if n < 128:
            out += _SMALL[n]
            return
        while n > 127:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        out.append(n)

    _INTEGERS[bounds] = integer
    _INTEGER_BOUNDS[integer] = bounds
    return integer


_INTEGERS: dict[tuple[int, int], Write] = {}
_INTEGER_BOUNDS: dict[Write, tuple[int, int]] = {}


def _double(out: bytearray, value: Any) -> None:
    if type(value) is not float:
        raise NotDirect
    out += _pack_double(value)


def _string(out: bytearray, value: Any) -> None:
    if type(value) is not str:
        raise NotDirect
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the general path says what is wrong
        raise NotDirect from None
    size = len(encoded)
    if size < 64:
        out += _SMALL[size << 1]  # the zig-zag varint of a small length, without a call
    else:
        _write_long(out, size)
    out += encoded


def _length(n: int) -> bytes:
    out = bytearray()
    _write_long(out, n)
    return bytes(out)


def _bytes(out: bytearray, value: Any) -> None:
    if type(value) is not str:
        raise NotDirect
    try:
        raw = convert_bytes(value, "$")
    except InvalidRecord:  # not base64: the general path says so at the field's path
        raise NotDirect from None
    _write_long(out, len(raw))
    out += raw


_PRIMITIVES: dict[str, Write] = {
    "null": _null,
    "boolean": _boolean,
    "int": _integer(_INT),
    "long": _integer(_LONG),
    "double": _double,
    "string": _string,
    "bytes": _bytes,
}


def _precision_scale(schema: Mapping[str, Any]) -> tuple[int, int]:
    """A decimal's precision and scale, if they are those the registry accepts."""
    precision, scale = schema.get("precision"), schema.get("scale", 0)
    if type(precision) is not int or type(scale) is not int:
        raise _Unsupported("decimal")
    if not 0 <= scale <= precision or not 1 <= precision <= _MAX_DECIMAL_PRECISION:
        raise _Unsupported("decimal")
    return precision, scale


def _decimal(precision: int, scale: int) -> Write:
    """A decimal on bytes, from an `int` or plain decimal text; see the module docstring."""
    limit = 10**precision  # unscaled values are below it in magnitude
    factor = 10**scale
    padding = ["0" * (scale - n) for n in range(scale + 1)]  # by number of fraction digits
    longest = precision + 3  # a sign, "0." and the digits; longer text has leading zeros

    def decimal(out: bytearray, value: Any) -> None:
        if type(value) is str:
            if len(value) > longest:
                raise NotDirect
            point = len(value) - scale - 1  # where the point is in text of `scale` digits after it
            if scale and point > 0 and value[point] == ".":
                # PostgreSQL's text for a numeric(p, s): always s digits after the point. Its
                # digits, checked without the pattern: ASCII digits after an optional "-".
                digits = value[:point] + value[point + 1 :]
                if not digits.isascii() or not (
                    digits.isdigit() or (point > 1 and digits[0] == "-" and digits[1:].isdigit())
                ):
                    raise NotDirect
                unscaled = int(digits)
            else:
                if _PLAIN_DECIMAL(value) is None:
                    raise NotDirect
                whole, _, fraction = value.partition(".")
                if len(fraction) > scale:  # the general path refuses it: it is never rounded
                    raise NotDirect
                unscaled = int(whole + fraction + padding[len(fraction)])
        elif type(value) is int:
            unscaled = value * factor
        else:
            raise NotDirect
        if not -limit < unscaled < limit:
            raise NotDirect
        size = (abs(unscaled).bit_length() + 8) // 8  # fastavro's: a byte more than minimal
        out += _SMALL[size << 1] if size < 64 else _length(size)
        out += unscaled.to_bytes(size, "big", signed=True)

    return decimal


def _fixed(size: Any) -> Write:
    if type(size) is not int:
        raise _Unsupported("fixed")

    def fixed(out: bytearray, value: Any) -> None:
        if type(value) is not str:
            raise NotDirect
        try:
            raw = convert_bytes(value, "$")
        except InvalidRecord:
            raise NotDirect from None
        if len(raw) != size:
            raise NotDirect
        out += raw

    return fixed


def _enum(symbols: list[str]) -> Write:
    index = {symbol: n for n, symbol in enumerate(symbols)}

    def enum(out: bytearray, value: Any) -> None:
        position = index.get(value) if type(value) is str else None
        if position is None:
            raise NotDirect
        _write_long(out, position)

    return enum


def _record(fields: tuple[_Field, ...]) -> Write:
    """A record's writer: one function, generated for its fields, that checks and writes each
    string, integer and nullable field in line and calls the writers of the others.

    A change event is records of many small fields (the CDC envelope of a five-column table has
    21, most of them the same from one change to the next: the source block's names, the
    commit time, the transaction), and a call per field cost more than the writing. Written by
    a loop calling each field's writer, a change of `bench/cdc.py`'s table took about 8.6 µs
    (in process, 20,000 inserts and updates); generated, with each string and multi-byte
    integer field remembering the bytes of its last value, about 5.0 µs. Only short strings
    (under 64 bytes) are remembered: the ones that repeat (names, codes), and a writer never
    holds on to a large text.

    The generated code does what the field writers do, in the same order, and raises
    `NotDirect` where they would: a missing field (`KeyError`) and text that is not UTF-8
    (`UnicodeEncodeError`) are turned into it at the end. A remembered field first asks whether
    its value is the very object it wrote last, checked then, and takes its bytes without any
    other check: a change event's source block holds the same objects change after change, so
    most of its eleven fields take that path. Any other value is compared with the remembered
    one only once its type is checked (so `True` never takes the bytes of `1`). The value and
    its bytes are kept as one tuple, replaced whole and read once per value, so threads sharing
    the writer never pair a value with another's bytes. Field names, tags and bounds enter the
    source as `repr` literals; writers and the remembered values as closure cells.
    """
    writers: dict[str, Write] = {}
    remembered: list[str] = []
    body: list[str] = []
    for number, (name, write, tags) in enumerate(fields):
        body.append(f"item = value[{name!r}]")
        inline = _inline(write, number, writers, remembered)
        if tags is None:
            body += inline
        else:
            body += [f"if item is None: out += {tags[0]!r}", "else:", f"    out += {tags[1]!r}"]
            body += ["    " + line for line in inline]
    cells = [f"{name} = NOTHING" for name in remembered]
    lines = [
        f"def make({', '.join(['NotDirect', 'SMALL', 'NOTHING', 'varint', *writers])}):",
        *["    " + line for line in cells],
        "    def record(out, value):",
        *([f"        nonlocal {', '.join(remembered)}"] if remembered else []),
        f"        if type(value) is not dict or len(value) != {len(fields)}:",
        "            raise NotDirect",
        "        try:",
        *["            " + line for line in body],
        "        except (KeyError, UnicodeEncodeError):",
        "            raise NotDirect from None",
        "    return record",
    ]
    namespace: dict[str, Any] = {}
    exec("\n".join(lines), namespace)  # the source is built above from literals only
    made: Write = namespace["make"](NotDirect, _SMALL, (_NOTHING, b""), _length, **writers)
    return made


# What a remembered field holds before its first value: equal to no value.
_NOTHING = object()


def _inline(
    write: Write, number: int, writers: dict[str, Write], remembered: list[str]
) -> list[str]:
    """The lines that write `item` in a generated record writer (see `_record`)."""
    last = f"last{number}"
    if write is _string:
        remembered.append(last)
        return [
            # read once (`seen`): another thread may replace it meanwhile
            f"if item is (seen := {last})[0]: out += seen[1]",
            "elif type(item) is not str: raise NotDirect",
            "elif item == seen[0]: out += seen[1]",
            "else:",
            '    encoded = item.encode("utf-8")',
            "    size = len(encoded)",
            "    if size < 64:",
            "        chunk = SMALL[size << 1] + encoded",
            "        out += chunk",
            f"        {last} = (item, chunk)",
            "    else:",
            "        out += varint(size)",
            "        out += encoded",
        ]
    bounds = _INTEGER_BOUNDS.get(write)
    if bounds is not None:
        low, high = bounds
        remembered.append(last)
        return [
            f"if item is (seen := {last})[0]: out += seen[1]",  # read once, as above
            f"elif type(item) is not int or not {low} <= item <= {high}: raise NotDirect",
            "elif item == seen[0]: out += seen[1]",
            "else:",
            "    n = (item << 1) ^ (item >> 63)",
            "    if n < 128: out += SMALL[n]",
            "    else:",
            "        start = len(out)",
            "        while n > 127:",
            "            out.append((n & 0x7F) | 0x80)",
            "            n >>= 7",
            "        out.append(n)",
            f"        {last} = (item, out[start:])",  # a copy of its bytes, which nothing changes
        ]
    writers[f"write{number}"] = write
    return [f"write{number}(out, item)"]


def _array(items: Write) -> Write:
    def array(out: bytearray, value: Any) -> None:
        if type(value) is not list:
            raise NotDirect
        if value:
            _write_long(out, len(value))
            for item in value:
                items(out, item)
        out += b"\x00"

    return array


def _map(values: Write) -> Write:
    def map_(out: bytearray, value: Any) -> None:
        if type(value) is not dict:
            raise NotDirect
        if value:
            _write_long(out, len(value))
            for key, item in value.items():
                _string(out, key)
                values(out, item)
        out += b"\x00"

    return map_


def _nullable(tags: tuple[bytes, bytes], write: Write) -> Write:
    null_tag, other_tag = tags

    def nullable(out: bytearray, value: Any) -> None:
        if value is None:
            out += null_tag
        else:
            out += other_tag
            write(out, value)

    return nullable
