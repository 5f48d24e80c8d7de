"""No module of the hub's packages is over 600 lines.

A module that long holds more than one concept: split it into modules, each named for its
concept. The rule covers every `.py` file the packages ship, sub-packages and migrations
included. Tests, benchmarks and tools are left out: the rule is for the product code, and a test
module follows the behaviour it checks, long scenarios included.
"""

import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.unit

MAX_LINES = 600


def _packages() -> list[str]:
    """The hub's packages, as setuptools installs them."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    return [pattern.removesuffix("*") for pattern in patterns]


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


@pytest.mark.parametrize("package", _packages())
def test_no_module_of_a_package_is_over_600_lines(package: str) -> None:
    modules = sorted((REPO / package).rglob("*.py"))
    assert modules, f"`{package}` has no modules: is it still a package?"
    too_long = [
        f"{path.relative_to(REPO)} ({_lines(path)} lines)"
        for path in modules
        if _lines(path) > MAX_LINES
    ]
    assert not too_long, (
        f"modules over {MAX_LINES} lines; split each into modules named for its concepts: "
        + ", ".join(too_long)
    )
