"""A real S3-compatible server for tests: versitygw on its posix backend, built by `make setup`
into .hub/bin. Each bucket is a folder under the server's root, and each object a file below
it, so a test can look at what landed in the bucket with plain file reads."""

import os
import secrets
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from tests.support.ports import free_port
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
VERSITYGW = Path(os.environ.get("HUB_HOME", REPO / ".hub")) / "bin" / "versitygw"


@dataclass(frozen=True)
class Bucket:
    """A bucket on the running server, and where its objects are on disk."""

    name: str
    endpoint: str
    access_key: str
    secret_key: str
    folder: Path

    def uri(self, path: str) -> str:
        return f"s3a://{self.name}/{path}"


class ObjectStore:
    """`versitygw posix ROOT` on a free loopback port, with fresh root keys, until exited."""

    def __init__(self, root: Path, log: Path) -> None:
        self._root, self._log = root, log
        self.port = free_port()
        self.access_key = f"hub{secrets.token_hex(4)}"
        self.secret_key = secrets.token_hex(16)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "ObjectStore":
        assert VERSITYGW.is_file(), (
            f"no S3 server at {VERSITYGW}: run `make setup` (or make object-store)"
        )
        self._root.mkdir(parents=True, exist_ok=True)
        self._out = self._log.open("wb")
        self.process = subprocess.Popen(
            [str(VERSITYGW), "--port", f"127.0.0.1:{self.port}", "--quiet", "posix",
             str(self._root)],
            # Keys by environment, so they are not in the process list.
            env={**os.environ, "ROOT_ACCESS_KEY": self.access_key,
                 "ROOT_SECRET_KEY": self.secret_key},
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_until(self._serving, timeout_s=60, what=f"versitygw on port {self.port}")
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._out.close()

    def bucket(self, name: str) -> Bucket:
        """A new, empty bucket: the posix backend serves each folder under its root as one."""
        folder = self._root / name
        folder.mkdir()
        return Bucket(name, self.endpoint, self.access_key, self.secret_key, folder)

    def _serving(self) -> bool:
        assert self.process.poll() is None, self._log.read_text(errors="replace")[-2000:]
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.port)) == 0
