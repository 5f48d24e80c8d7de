import pytest

from hub_core.errors import ErrorCode
from registry.errors import InvalidWireFormat
from registry.types import SchemaId
from registry.wire import frame, unframe

pytestmark = pytest.mark.unit


def test_frame_is_magic_byte_then_big_endian_id_then_payload() -> None:
    assert frame(SchemaId(258), b"\x02ab") == b"\x00\x00\x00\x01\x02\x02ab"


def test_unframe_returns_the_id_and_payload_it_was_framed_with() -> None:
    assert unframe(frame(SchemaId(2**31 - 1), b"payload")) == (2**31 - 1, b"payload")


@pytest.mark.parametrize(
    ("message", "reason"),
    [(b"\x00\x00\x01", "shorter than the 5-byte"), (b"\x01\x00\x00\x00\x01x", "magic byte 1")],
)
def test_unframe_rejects_messages_not_in_the_confluent_format(message: bytes, reason: str) -> None:
    with pytest.raises(InvalidWireFormat, match=reason) as caught:
        unframe(message)
    assert caught.value.code is ErrorCode.INVALID_WIRE_FORMAT
