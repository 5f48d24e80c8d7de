"""Fetch a pinned Go toolchain from the Go module proxy, for a machine without a recent Go.

`make setup` builds the local S3 server with `go install`, which needs Go 1.25. Go 1.21 and
later fetch a newer toolchain by themselves when a module asks for one; a machine with an
older Go, or none (a fresh Debian machine), gets this one: the zip the `go` command itself
downloads for `GOTOOLCHAIN`, from the same proxy, checked against the `h1:` hash pinned below
(the go.sum hash of the module, which `go mod download -json` prints for it).

    python3 tools/fetch_go.py DEST    # prints the path of the `go` binary under DEST

Standard library only: it runs before the virtual environment exists.
"""

import base64
import hashlib
import io
import platform
import sys
import urllib.request
import zipfile
from pathlib import Path

VERSION = "1.25.14"
PROXY = "https://proxy.golang.org"
# go.sum hashes of golang.org/toolchain@v0.0.1-go<VERSION>.<platform>
PINNED = {"linux-amd64": "h1:XriDgll2yv4W2YeUo2X/WuUuy+iGJkXGH0CQloMBEXo="}
_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}


def module_hash(archive: zipfile.ZipFile) -> str:
    """The `h1:` hash of a module zip, as Go computes it: SHA-256 over `<sha256>  <name>` lines
    of its files, sorted by name."""
    names = sorted(name for name in archive.namelist() if not name.endswith("/"))
    summary = "".join(f"{hashlib.sha256(archive.read(n)).hexdigest()}  {n}\n" for n in names)
    return "h1:" + base64.b64encode(hashlib.sha256(summary.encode()).digest()).decode()


def fetch(dest: Path) -> Path:
    """The `go` binary of the pinned toolchain under `dest`, downloaded when not there yet."""
    target = f"linux-{_ARCH.get(platform.machine(), platform.machine())}"
    module = f"golang.org/toolchain@v0.0.1-go{VERSION}.{target}"
    go = dest / module / "bin" / "go"
    if go.is_file():
        return go
    if target not in PINNED:
        raise SystemExit(f"no pinned Go toolchain for {target}: install Go {VERSION} or later")
    url = f"{PROXY}/golang.org/toolchain/@v/v0.0.1-go{VERSION}.{target}.zip"
    print(f"==> Go {VERSION} from {url}", file=sys.stderr, flush=True)
    with urllib.request.urlopen(url, timeout=300) as response:
        archive = zipfile.ZipFile(io.BytesIO(response.read()))
    found = module_hash(archive)
    if found != PINNED[target]:
        raise SystemExit(f"{url}: hash {found} is not the pinned {PINNED[target]}")
    for entry in archive.infolist():
        path = Path(archive.extract(entry, dest))
        mode = entry.external_attr >> 16
        if mode and not entry.is_dir():
            path.chmod(mode & 0o755)
    return go


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print(fetch(Path(sys.argv[1]).resolve()))
