"""The cleaning rules themselves: each a function from a value to its cleaned form.

`registry.cleaning` checks which rules a field declares and where they apply; this module holds
what each rule does to one value. Every step takes any value and returns the cleaned string or
number, or None when it leaves the value as it is (not a string of a kind it serves, nothing to
change, or a result that would not be lossless).
"""

import math
import re
import struct
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from enum import StrEnum, unique
from typing import Any

from registry.errors import InvalidSchema

Step = Callable[[Any], Any]  # the new value, or None for no change


@unique
class Rule(StrEnum):
    """The cleaning rules a field can declare in `"hub.clean"`."""

    TRIM = "trim"
    COLLAPSE_WHITESPACE = "collapse_whitespace"
    LOWERCASE = "lowercase"
    UPPERCASE = "uppercase"
    ENUM_CASE_INSENSITIVE = "enum_case_insensitive"
    UTC_TIMESTAMP = "utc_timestamp"
    PARSE_NUMBER = "parse_number"


_WHITESPACE = re.compile(r"\s+")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_UTC_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z", re.ASCII)
_OFFSET_TIMESTAMP = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2})(?::(\d{2})(?:[.,](\d+))?)?(Z|[+-]\d{2}(?::?\d{2})?)",
    re.ASCII,
)


def rule_step(rule: Rule, kind: str, schema: Mapping[str, Any], path: str) -> Step | None:
    """The step of `rule` for a value of `kind` (None: the rule has nothing to do there)."""
    if rule is Rule.ENUM_CASE_INSENSITIVE:
        return _enum_step(schema, path)
    if rule is Rule.PARSE_NUMBER:
        return _NUMBER_STEPS.get(kind)
    return _TEXT_STEPS[rule]


def _trim(value: Any) -> str | None:
    if isinstance(value, str):
        out = value.strip()
        return out if len(out) != len(value) else None
    return None


def _text(transform: Callable[[str], str]) -> Step:
    def step(value: Any) -> str | None:
        if isinstance(value, str):
            out = transform(value)
            return out if out != value else None
        return None

    return step


def _utc_timestamp(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    if _UTC_TIMESTAMP.fullmatch(value):
        return None  # already canonical (or no real instant, which validation reports)
    match = _OFFSET_TIMESTAMP.fullmatch(value)
    if match is None:
        return None
    day, minutes, seconds, fraction, offset = match.groups()
    try:
        moment = datetime.fromisoformat(f"{day}T{minutes}:{seconds or '00'}{offset}")
        utc = moment.astimezone(UTC).replace(tzinfo=None)
    except (ValueError, OverflowError):
        return None  # not a real instant: validation says so
    out = utc.isoformat(timespec="seconds") + (f".{fraction}" if fraction else "") + "Z"
    return out if out != value else None


def _enum_step(schema: Mapping[str, Any], path: str) -> Step:
    symbols: list[str] = schema["symbols"]
    exact = frozenset(symbols)
    folded: dict[str, str] = {}
    for symbol in symbols:
        other = folded.setdefault(symbol.lower(), symbol)
        if other != symbol:
            raise InvalidSchema(
                f"Invalid schema: field {path}: enum '{schema['name']}' has symbols "
                f"'{other}' and '{symbol}' that differ only by case, so "
                f"'{Rule.ENUM_CASE_INSENSITIVE}' cannot choose between them; rename one or "
                "drop the rule."
            )

    def step(value: Any) -> str | None:
        if isinstance(value, str) and value not in exact and value.isascii():
            return folded.get(value.lower())
        return None

    return step


def _integer(low: int, high: int) -> Step:
    def step(value: Any) -> int | None:
        number = _decimal(value)
        if number is None or not low <= number <= high or number != number.to_integral_value():
            return None
        return int(number)

    return step


def _double(value: Any) -> float | None:
    number = _decimal(value)
    if number is None:
        return None
    out = float(value)
    return out if math.isfinite(out) and Decimal(repr(out)) == number else None


def _float(value: Any) -> float | None:
    number = _decimal(value)
    if number is None:
        return None
    out = float(value)
    try:
        stored = struct.unpack("<f", struct.pack("<f", out))[0]
    except OverflowError:
        return None
    return out if math.isfinite(stored) and Decimal(_shortest_float32(stored)) == number else None


def _decimal(value: Any) -> Decimal | None:
    if not isinstance(value, str) or _NUMBER.fullmatch(value) is None:
        return None
    try:
        return Decimal(value)
    except InvalidOperation:  # an exponent past what Decimal holds
        return None


def _shortest_float32(stored: float) -> str:
    """The shortest decimal text that reads back as the same 32-bit float."""
    for digits in range(1, 10):
        text = f"{stored:.{digits}g}"
        try:
            if struct.unpack("<f", struct.pack("<f", float(text)))[0] == stored:
                return text
        except OverflowError:  # rounded past the largest float: more digits needed
            continue
    return repr(stored)  # unreachable: 9 significant digits always round-trip


_TEXT_STEPS: dict[Rule, Step] = {
    Rule.TRIM: _trim,
    Rule.COLLAPSE_WHITESPACE: _text(lambda s: _WHITESPACE.sub(" ", s)),
    Rule.LOWERCASE: _text(str.lower),
    Rule.UPPERCASE: _text(str.upper),
    Rule.UTC_TIMESTAMP: _utc_timestamp,
}
_NUMBER_STEPS: dict[str, Step] = {
    "int": _integer(-(2**31), 2**31 - 1),
    "long": _integer(-(2**63), 2**63 - 1),
    "float": _float,
    "double": _double,
    # "decimal": none; serde reads decimal text exactly, so the text is already canonical.
}
