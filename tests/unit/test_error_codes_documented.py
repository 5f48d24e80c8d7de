"""The error table of the getting-started guide lists exactly the codes the hub answers with."""

import re

import pytest

from hub_core.errors import ErrorCode
from tests.conftest import REPO

pytestmark = pytest.mark.unit


def test_every_error_code_is_documented_once_and_no_other() -> None:
    guide = (REPO / "docs" / "getting-started.md").read_text()
    rows = re.findall(r"^\| (\d{5}) \| (\d{3}) \| `(\w+)` \|", guide, flags=re.MULTILINE)

    documented = [(int(code), int(status), name) for code, status, name in rows]
    expected = [(code.value, code.http_status, code.name) for code in ErrorCode]
    assert sorted(documented) == sorted(expected)
