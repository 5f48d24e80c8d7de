"""Building pgoutput protocol messages by hand, as PostgreSQL sends them, for decoder tests."""

import struct

from connectors.postgres.pgoutput import UNCHANGED_TOAST


def pg_string(text: str) -> bytes:
    """A NUL-terminated string."""
    return text.encode() + b"\x00"


def pg_tuple(*values: str | object | None) -> bytes:
    """TupleData: null (`n`), unchanged TOAST (`u`) or text (`t`) columns."""
    out = struct.pack(">h", len(values))
    for value in values:
        if value is None:
            out += b"n"
        elif value is UNCHANGED_TOAST:
            out += b"u"
        else:
            assert isinstance(value, str)
            raw = value.encode()
            out += b"t" + struct.pack(">i", len(raw)) + raw
    return out
