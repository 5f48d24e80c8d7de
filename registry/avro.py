"""Parsing Avro schema text into the canonical form the registry stores and compares."""

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType

from registry.errors import InvalidSchema


@dataclass(frozen=True, slots=True)
class AvroSchema:
    """A parsed Avro schema: its canonical text, identity fingerprint and fastavro form."""

    canonical: str
    fingerprint: str
    parsed: Any

    @property
    def json(self) -> Any:
        """The schema as JSON values (dicts, lists, strings)."""
        return json.loads(self.canonical)


def parse(text: str) -> AvroSchema:
    """Parse schema text; raise `InvalidSchema` (42201) saying what is wrong."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidSchema(
            f"Invalid schema: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})."
        ) from exc
    try:
        parsed = fastavro.parse_schema(document, _write_hint=False)
    except (SchemaParseException, UnknownType, ValueError, TypeError, KeyError) as exc:
        raise InvalidSchema(f"Invalid schema: {exc}") from exc
    # Compact JSON keeps every attribute (docs, defaults, custom cleaning rules) while making
    # whitespace and formatting irrelevant to a schema's identity.
    canonical = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
    fingerprint = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return AvroSchema(canonical=canonical, fingerprint=fingerprint, parsed=parsed)
