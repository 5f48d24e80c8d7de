"""The Go toolchain fetched for fresh machines is checked with the hash Go itself computes:
`tools/fetch_go.py`'s `module_hash` must agree with `go mod download` on a module zip."""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tools"))

from fetch_go import module_hash  # noqa: E402 (tools/ is not a package)

pytestmark = pytest.mark.unit


def _go() -> str:
    """The Go that `make setup` uses (the one on PATH, or the toolchain it fetched)."""
    found = subprocess.run(
        ["make", "-s", "--no-print-directory", "go-path"],
        cwd=REPO, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return found.stdout.strip().splitlines()[-1]


def test_the_module_hash_is_the_one_go_computes(tmp_path: Path) -> None:
    versions = tmp_path / "proxy" / "example.com" / "tiny" / "@v"
    versions.mkdir(parents=True)
    (versions / "list").write_text("v1.0.0\n")
    (versions / "v1.0.0.info").write_text('{"Version":"v1.0.0","Time":"2026-01-01T00:00:00Z"}')
    (versions / "v1.0.0.mod").write_text("module example.com/tiny\n")
    archive = versions / "v1.0.0.zip"
    with zipfile.ZipFile(archive, "w") as module:
        # Out of name order, and a nested file, as in a real toolchain zip.
        module.writestr("example.com/tiny@v1.0.0/go.mod", "module example.com/tiny\n")
        module.writestr("example.com/tiny@v1.0.0/b.go", "package tiny\n")
        module.writestr("example.com/tiny@v1.0.0/a/z.go", "package a\n")
    env = {
        **os.environ,
        "GOPROXY": f"file://{tmp_path / 'proxy'}",
        "GONOSUMDB": "example.com",
        "GOMODCACHE": str(tmp_path / "cache"),
        "GOFLAGS": "-mod=mod",
        "GOTOOLCHAIN": "local",
    }

    downloaded = subprocess.run(
        [_go(), "mod", "download", "-json", "example.com/tiny@v1.0.0"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip

    assert module_hash(zipfile.ZipFile(archive)) == json.loads(downloaded.stdout)["Sum"]
