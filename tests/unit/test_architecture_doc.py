"""The architecture page and the README describe the tree as it is.

`docs/architecture.md` lists every module of every package, and shows the layers that
`pyproject.toml` makes import-linter check; the README's "What's here" names every top-level
folder. A module added, moved or removed without its line in the docs fails here.
"""

import fnmatch
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _packages() -> list[str]:
    """The hub's packages, as setuptools installs them."""
    patterns = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    return [p.removesuffix("*") for p in patterns]


def _package_table() -> dict[str, list[str]]:
    """Package -> the module names and patterns its row in "## Packages" lists."""
    section = ARCHITECTURE.split("## Packages", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and re.fullmatch(r"`\w+`", cells[0]):
            rows[cells[0].strip("`")] = re.findall(r"`([^`]+)`", cells[1])
    return rows


def _modules(package: str) -> set[str]:
    """A package's modules (`x.py`) and folders (`x/`), `__init__.py` left out."""
    folder = ROOT / package
    found = {p.name for p in folder.glob("*.py") if p.name != "__init__.py"}
    found |= {f"{p.name}/" for p in folder.iterdir() if p.is_dir() and p.name != "__pycache__"}
    return found


@pytest.mark.parametrize("package", _packages())
def test_every_module_of_a_package_is_listed_and_every_listed_module_exists(package: str) -> None:
    listed = _package_table().get(package)
    assert listed is not None, f"docs/architecture.md has no row for package `{package}`"
    modules = _modules(package)
    patterns = [p for p in listed if p.endswith((".py", "/")) and "/" not in p.rstrip("/")]
    unlisted = sorted(m for m in modules if not any(fnmatch.fnmatch(m, p) for p in patterns))
    missing = sorted(p for p in patterns if not any(fnmatch.fnmatch(m, p) for m in modules))
    assert not unlisted, f"`{package}` modules missing from docs/architecture.md: {unlisted}"
    assert not missing, (
        f"docs/architecture.md lists `{package}` modules that do not exist: {missing}"
    )


def test_the_package_table_lists_no_package_that_does_not_exist() -> None:
    assert sorted(_package_table()) == sorted(_packages())


def test_the_layers_shown_are_the_layers_import_linter_checks() -> None:
    contracts = PYPROJECT["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers")
    shown = ARCHITECTURE.split("### Layers", 1)[1].split("```", 2)[1]
    shown_layers = [line.strip() for line in shown.strip().splitlines()]
    assert shown_layers == layers


def test_the_loaders_layers_shown_are_the_layers_import_linter_checks() -> None:
    contracts = PYPROJECT["tool"]["importlinter"]["contracts"]
    layers = next(
        c["layers"]
        for c in contracts
        if c["type"] == "layers" and c.get("containers") == ["spark_loaders"]
    )
    shown = ARCHITECTURE.split("### Layers", 1)[1].split("```", 4)[3]
    shown_layers = [line.strip() for line in shown.strip().splitlines()]
    assert shown_layers == layers


def test_the_readme_names_every_top_level_folder() -> None:
    readme = (ROOT / "README.md").read_text()
    tree = readme.split("## What's here", 1)[1].split("```", 2)[1]
    named = {line.split("/", 1)[0] for line in tree.splitlines() if re.match(r"^[.\w-]+/", line)}
    # The tracked folders: tests and tools may leave others (caches, Spark's scratch) behind.
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    folders = {path.split("/", 1)[0] for path in tracked if "/" in path}
    folders -= {".ci"}
    assert folders - named == set(), f"README.md 'What's here' misses {sorted(folders - named)}"
    assert named - folders - {".hub"} == set(), "README.md names folders that do not exist"
