"""The Confluent wire format: magic byte 0, a 4-byte big-endian schema id, then the Avro datum."""

import struct

from registry.errors import InvalidWireFormat
from registry.types import SchemaId

MAGIC_BYTE = 0
HEADER_SIZE = 5
_HEADER = struct.Struct(">bI")


def frame(schema_id: SchemaId, payload: bytes) -> bytes:
    """Prefix an Avro binary datum with the Confluent header for `schema_id`."""
    return _HEADER.pack(MAGIC_BYTE, schema_id) + payload


def unframe(message: bytes) -> tuple[SchemaId, bytes]:
    """Split a Confluent-framed message into its schema id and Avro payload."""
    if len(message) < HEADER_SIZE:
        raise InvalidWireFormat(
            f"Message of {len(message)} bytes is shorter than the {HEADER_SIZE}-byte "
            "Confluent header; it was not written by a Confluent-compatible serializer."
        )
    magic, schema_id = _HEADER.unpack_from(message)
    if magic != MAGIC_BYTE:
        raise InvalidWireFormat(
            f"Unknown magic byte {magic}; Confluent-framed messages start with {MAGIC_BYTE}."
        )
    return SchemaId(schema_id), message[HEADER_SIZE:]
