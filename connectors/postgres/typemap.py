"""PostgreSQL column types as Avro types, and column text as the natural JSON the Publisher takes.

Values arrive as text in each type's output format, both from `pgoutput` and from the snapshot
(which loads every column as text), so one converter per column serves both. The sessions run
with `DateStyle=ISO`, `TimeZone=UTC`, `bytea_output=hex` and `extra_float_digits=3` so that text
is unambiguous and lossless.

Each converter returns the value in the shape the direct Avro writer takes as it is
(`registry/binary.py`), so a row is written in one walk instead of being converted again by
the Publisher: timestamps and dates become epoch numbers, read by the very functions the
Publisher would read their text with (`registry.serde.epoch_micros`, `epoch_days`), and
numeric(p,s) stays its exact text, which the writer reads into the decimal's unscaled integer.
Text those functions do not read (`infinity`, BC dates, years past 9999, a numeric `NaN`) is
passed on as it came, and the Publisher refuses the record as it always did: the bytes of every
record, and every refusal, are what they were when each value was passed on as text.

Decisions worth knowing:
- numeric(p,s) becomes an Avro decimal; unconstrained `numeric` becomes a string, because Avro
  decimals need a fixed scale and a wrong guess would round values. So does numeric(p,s) with
  p over 38 (Spark's widest decimal, which the registry holds feeds to) or s over p: its exact
  text lands, where a decimal could not.
- Enums become strings (`hub.pg.type` names the enum): adding a label to a PostgreSQL enum is
  routine, while adding a symbol to an Avro enum breaks readers with older schemas.
- json/jsonb become strings marked `connect.name: io.debezium.data.Json`, as Debezium does.
- Types without a natural Avro form (interval, inet, ranges, geometric types, ...) become their
  PostgreSQL text.
"""

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from registry.schema_rules import SPARK_MAX_DECIMAL_PRECISION
from registry.serde import epoch_days, epoch_micros

# A converter turns a column's text into the value the Avro encoder takes.
Converter = Callable[[str], Any]

UNCONSTRAINED_NUMERIC_DOC = (
    "PostgreSQL numeric without precision/scale: carried as its exact decimal text."
)


@dataclass(frozen=True, slots=True)
class PgType:
    """What the catalog says about a type that is not built in (enum, domain, array, other)."""

    oid: int
    name: str  # schema-qualified, e.g. public.mood
    kind: str  # pg_type.typtype: b base, d domain, e enum, c composite, r range, ...
    element_oid: int  # for arrays: the element type; else 0
    base_oid: int  # for domains: the underlying type; else 0
    base_modifier: int  # for domains: the underlying type's modifier


@dataclass(frozen=True, slots=True)
class ColumnType:
    """The Avro form of one column."""

    avro: Any  # the Avro type, without the null branch
    convert: Converter
    doc: str | None = None  # a note from the mapping (not the column comment)
    pg_type: str = ""


def _bool(text: str) -> bool:
    return text == "t"


def _bytea(text: str) -> str:
    # bytea_output=hex: `\x` then two hex digits per byte; the encoder takes base64.
    return base64.b64encode(bytes.fromhex(text[2:])).decode("ascii")


def _time_micros(text: str) -> int:
    hours, minutes, seconds = text.split(":")
    whole, _, fraction = seconds.partition(".")
    micros = int((fraction + "000000")[:6]) if fraction else 0
    return ((int(hours) * 60 + int(minutes)) * 60 + int(whole)) * 1_000_000 + micros


def _text(text: str) -> str:
    return text


def _timestamp(text: str) -> int | str:
    try:
        return epoch_micros(text)
    except ValueError:  # infinity, BC, past 9999: the Publisher refuses the text, as before
        return text


def _date(text: str) -> int | str:
    try:
        return epoch_days(text)
    except ValueError:
        return text


def _float(text: str) -> float:
    return float(text)


_STRING = ColumnType(avro="string", convert=_text)
_JSON = ColumnType(
    avro={"type": "string", "connect.name": "io.debezium.data.Json"},
    convert=_text,
    doc="JSON document as text.",
)

# Built-in type OIDs (stable across PostgreSQL versions: they are in pg_type.dat).
_SCALARS: dict[int, tuple[str, ColumnType]] = {
    16: ("boolean", ColumnType(avro="boolean", convert=_bool)),
    17: ("bytea", ColumnType(avro="bytes", convert=_bytea)),
    18: ("char", _STRING),
    19: ("name", _STRING),
    20: ("bigint", ColumnType(avro="long", convert=int)),
    21: ("smallint", ColumnType(avro="int", convert=int)),
    23: ("integer", ColumnType(avro="int", convert=int)),
    25: ("text", _STRING),
    26: ("oid", ColumnType(avro="long", convert=int)),
    114: ("json", _JSON),
    700: ("real", ColumnType(avro="float", convert=_float)),
    701: ("double precision", ColumnType(avro="double", convert=_float)),
    1042: ("character", _STRING),
    1043: ("character varying", _STRING),
    1082: ("date", ColumnType(avro={"type": "int", "logicalType": "date"}, convert=_date)),
    1083: (
        "time",
        ColumnType(avro={"type": "long", "logicalType": "time-micros"}, convert=_time_micros),
    ),
    1114: (
        "timestamp",
        ColumnType(
            avro={"type": "long", "logicalType": "local-timestamp-micros"},
            convert=_timestamp,
            doc="Timestamp without time zone (wall-clock time).",
        ),
    ),
    1184: (
        "timestamptz",
        ColumnType(avro={"type": "long", "logicalType": "timestamp-micros"}, convert=_timestamp),
    ),
    2950: ("uuid", ColumnType(avro={"type": "string", "logicalType": "uuid"}, convert=_text)),
    3802: ("jsonb", _JSON),
}
_NUMERIC = 1700
_TIMESTAMPS = frozenset({1114, 1184})


def _remembering(convert: Converter) -> Converter:
    """`convert` for one column, answering text equal to the last it read with the value it
    gave then. A transaction's rows often share a timestamp (`now()` is the transaction's
    start), and reading one costs about 1 µs, a tenth of decoding a change of `bench/cdc.py`'s
    table. The text and its value are kept as one tuple, replaced whole, so that a converter
    shared by threads never answers one text with another's value."""
    last: tuple[str | None, Any] = (None, None)

    def remembering(text: str) -> Any:
        nonlocal last
        seen = last
        if text == seen[0]:
            return seen[1]
        value = convert(text)
        last = (text, value)
        return value

    return remembering


# Array type OID -> element type OID, for the built-in array types.
_ARRAYS: dict[int, int] = {
    1000: 16,
    1001: 17,
    1002: 18,
    1003: 19,
    1016: 20,
    1005: 21,
    1007: 23,
    1009: 25,
    1028: 26,
    199: 114,
    1021: 700,
    1022: 701,
    1014: 1042,
    1015: 1043,
    1182: 1082,
    1183: 1083,
    1115: 1114,
    1185: 1184,
    1231: 1700,
    2951: 2950,
    3807: 3802,
}


def is_builtin(type_oid: int) -> bool:
    """Whether the mapping knows `type_oid` without asking the catalog."""
    return type_oid in _SCALARS or type_oid in _ARRAYS or type_oid == _NUMERIC


def numeric_precision_scale(type_modifier: int) -> tuple[int, int] | None:
    """(precision, scale) of numeric(p,s), or None for an unconstrained numeric."""
    if type_modifier < 4:
        return None
    packed = type_modifier - 4
    precision = (packed >> 16) & 0xFFFF
    scale = packed & 0x7FF
    if scale & 0x400:  # PostgreSQL 15 allows negative scales, stored as 11-bit two's complement
        return None
    return precision, scale


def column_type(
    type_oid: int, type_modifier: int, lookup: Callable[[int], PgType] | None = None
) -> ColumnType:
    """The Avro form of a column of type `type_oid`; `lookup` describes non-built-in types."""
    if type_oid in _SCALARS:
        name, mapped = _SCALARS[type_oid]
        convert = _remembering(mapped.convert) if type_oid in _TIMESTAMPS else mapped.convert
        return ColumnType(avro=mapped.avro, convert=convert, doc=mapped.doc, pg_type=name)
    if type_oid == _NUMERIC:
        return _numeric(type_modifier)
    if type_oid in _ARRAYS:
        return _array(column_type(_ARRAYS[type_oid], type_modifier, lookup))
    if lookup is None:
        return ColumnType(avro="string", convert=_text, pg_type=str(type_oid))
    described = lookup(type_oid)
    if described.kind == "d" and described.base_oid:
        base = column_type(described.base_oid, described.base_modifier, lookup)
        return ColumnType(
            avro=base.avro, convert=base.convert, doc=base.doc, pg_type=described.name
        )
    if described.element_oid:
        return _array(column_type(described.element_oid, -1, lookup))
    if described.kind == "e":
        return ColumnType(
            avro={"type": "string", "hub.pg.type": described.name},
            convert=_text,
            doc=f"PostgreSQL enum {described.name}, carried as its label.",
            pg_type=described.name,
        )
    return ColumnType(
        avro="string",
        convert=_text,
        doc=f"PostgreSQL type {described.name}, carried as its text form.",
        pg_type=described.name,
    )


def _numeric(type_modifier: int) -> ColumnType:
    bounds = numeric_precision_scale(type_modifier)
    if bounds is None:
        return ColumnType(
            avro="string", convert=_text, doc=UNCONSTRAINED_NUMERIC_DOC, pg_type="numeric"
        )
    precision, scale = bounds
    if precision > SPARK_MAX_DECIMAL_PRECISION or scale > precision:
        return ColumnType(
            avro="string",
            convert=_text,
            doc=f"PostgreSQL numeric({precision},{scale}), wider than a Spark decimal (at most "
            f"{SPARK_MAX_DECIMAL_PRECISION} digits): carried as its exact decimal text.",
            pg_type=f"numeric({precision},{scale})",
        )
    return ColumnType(
        avro={"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale},
        convert=_text,
        pg_type=f"numeric({precision},{scale})",
    )


def _array(element: ColumnType) -> ColumnType:
    convert_element = element.convert

    def convert(text: str) -> list[Any]:
        return [None if item is None else convert_element(item) for item in parse_array(text)]

    return ColumnType(
        avro={"type": "array", "items": ["null", element.avro]},
        convert=convert,
        doc=element.doc,
        pg_type=f"{element.pg_type}[]",
    )


def parse_array(text: str) -> list[str | None]:
    """The elements of a one-dimensional PostgreSQL array literal, e.g. `{1,NULL,"a b"}`.

    Quoted elements may contain commas, braces and backslash escapes; an unquoted NULL is SQL
    NULL. A multi-dimensional array is refused: its Avro form would need nested arrays.
    """
    if text.startswith("["):  # explicit bounds, e.g. [0:1]={1,2}
        text = text[text.index("=") + 1 :]
    if not (text.startswith("{") and text.endswith("}")):
        raise ValueError(f"not a PostgreSQL array literal: {text[:40]!r}")
    body = text[1:-1]
    if not body:
        return []
    if body.startswith("{"):
        raise ValueError("multi-dimensional arrays are not supported")
    items: list[str | None] = []
    position = 0
    length = len(body)
    while position <= length:
        if position < length and body[position] == '"':
            position += 1
            chars: list[str] = []
            while body[position] != '"':
                if body[position] == "\\":
                    position += 1
                chars.append(body[position])
                position += 1
            items.append("".join(chars))
            position += 2  # the closing quote and the comma
        else:
            end = body.find(",", position)
            end = length if end < 0 else end
            raw = body[position:end]
            items.append(None if raw == "NULL" else raw)
            position = end + 1
    return items
