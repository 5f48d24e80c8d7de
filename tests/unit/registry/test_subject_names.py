"""Subject names no database column can hold are refused with 42208 before any lookup."""

import pytest

from hub_core.errors import ErrorCode
from registry.errors import InvalidSubject
from registry.limits import MAX_SUBJECT_LENGTH, parse_subject

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "name", ["sales.a\x00b-value", "sales.a\nb", "sales.\x7f", "s" * (MAX_SUBJECT_LENGTH + 1), ""]
)
def test_a_subject_with_a_control_character_or_over_255_characters_is_42208(name: str) -> None:
    with pytest.raises(InvalidSubject) as raised:
        parse_subject(name)
    assert raised.value.code is ErrorCode.INVALID_SUBJECT == 42208
    assert "\x00" not in raised.value.message  # the message shows the name, never its NULs


@pytest.mark.parametrize("name", ["sales.orders-value", "x" * MAX_SUBJECT_LENGTH, "é.ü :/"])
def test_any_other_subject_name_is_taken_as_it_is(name: str) -> None:
    assert parse_subject(name) == name
