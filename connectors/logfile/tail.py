"""Following files safely: identity by device+inode and a fingerprint, complete lines only.

- Rotation by rename: the open file keeps being read to its end under its new name (or after
  it left the glob), and the new file at the old path is a new identity read from its start. A
  file that left the globs stays open `rotate_wait_seconds` after it was first seen read to its
  end, for the lines its writer adds after the rename (as Fluent Bit's `Rotate_Wait`).
- Truncation in place (copytruncate): a file shorter than the position, or whose first bytes
  changed, is read again from the start.
- Positions: the byte offset after the last complete line handed out. A line still being
  written (no newline yet) is left for the next look.
"""

import glob
import hashlib
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, BinaryIO

log = logging.getLogger(__name__)

FINGERPRINT_BYTES = 256
_READ_BYTES = 1 << 20


@dataclass
class _Followed:
    identity: str  # "<device>:<inode>"
    path: str
    handle: BinaryIO
    offset: int
    fingerprint: str
    fingerprint_bytes: int
    matched: bool = True
    finished_at: float | None = None  # when it was first seen unmatched and read to its end


@dataclass(frozen=True, slots=True)
class Chunk:
    """Complete lines of one file, and the position after them."""

    partition: dict[str, str]
    position: dict[str, Any]
    lines: list[bytes] = field(default_factory=list)
    oversize: list[bytes] = field(default_factory=list)  # lines longer than the limit (cut)


def _fingerprint(handle: BinaryIO, size: int) -> tuple[str, int]:
    handle.seek(0)
    head = handle.read(size)
    return hashlib.sha256(head).hexdigest(), len(head)


class Tailer:
    """Follows every file matched by `patterns`, handing out new complete lines."""

    def __init__(
        self,
        patterns: list[str],
        *,
        stored: dict[str, dict[str, Any]],
        start_at_end: bool,
        max_line_bytes: int,
        rotate_wait_s: float = 5.0,
    ) -> None:
        self._patterns = patterns
        self._rotate_wait_s = rotate_wait_s
        self._stored = stored  # identity -> stored position
        self._start_at_end = start_at_end
        self._max_line = max_line_bytes
        self._files: dict[str, _Followed] = {}

    def close(self) -> None:
        for followed in self._files.values():
            followed.handle.close()
        self._files.clear()

    def poll(self, max_lines: int) -> list[Chunk]:
        """New complete lines of every followed file (at most `max_lines` per file)."""
        self._discover()
        chunks = []
        for identity in list(self._files):
            followed = self._files[identity]
            self._check_truncation(followed)
            chunk = self._read(followed, max_lines)
            if chunk is not None:
                chunks.append(chunk)
            elif not followed.matched:
                # Rotated away or deleted, and read to its end: done with it once its writer
                # had `rotate_wait_s` to finish.
                now = time.monotonic()
                if followed.finished_at is None:
                    followed.finished_at = now
                if now - followed.finished_at >= self._rotate_wait_s:
                    log.info("finished %s (%s): no longer matched", followed.path, identity)
                    followed.handle.close()
                    del self._files[identity]
        return chunks

    def unread(self) -> dict[str, int]:
        """Bytes after the position of the followed files, by path: the path a glob last
        matched, so a file renamed out of the globs and not read to its end yet adds to the
        figure of its successor at its old path."""
        unread: dict[str, int] = {}
        for followed in self._files.values():
            size = os.fstat(followed.handle.fileno()).st_size
            unread[followed.path] = unread.get(followed.path, 0) + max(0, size - followed.offset)
        return unread

    def _discover(self) -> None:
        for followed in self._files.values():
            followed.matched = False
        for pattern in self._patterns:
            for path in sorted(glob.glob(pattern)):
                try:
                    stat = os.stat(path)
                except FileNotFoundError:
                    continue
                if not os.path.isfile(path):
                    continue
                identity = f"{stat.st_dev}:{stat.st_ino}"
                known = self._files.get(identity)
                if known is not None:
                    if known.path != path:
                        log.info("%s is now %s", known.path, path)
                        known.path = path
                    known.matched = True
                    known.finished_at = None
                    continue
                self._follow(identity, path)

    def _follow(self, identity: str, path: str) -> None:
        try:
            handle = open(path, "rb")  # noqa: SIM115 - kept open across polls, closed in poll/close
        except OSError as exc:
            log.warning("cannot open %s: %s", path, exc)
            return
        size = os.fstat(handle.fileno()).st_size
        stored = self._stored.get(identity)
        offset = 0
        if stored is not None:
            head, _ = _fingerprint(handle, int(stored["fingerprint_bytes"]))
            if head == stored["fingerprint"] and int(stored["offset"]) <= size:
                offset = int(stored["offset"])
            else:
                log.info("%s: stored position is of another file (inode reused); from start", path)
        elif self._start_at_end:
            offset = size
        fingerprint, length = _fingerprint(handle, FINGERPRINT_BYTES)
        self._files[identity] = _Followed(identity, path, handle, offset, fingerprint, length)
        log.info("following %s (%s) from byte %d", path, identity, offset)

    def _check_truncation(self, followed: _Followed) -> None:
        size = os.fstat(followed.handle.fileno()).st_size
        head, length = _fingerprint(followed.handle, followed.fingerprint_bytes)
        if size < followed.offset or head != followed.fingerprint:
            log.info("%s was truncated or rewritten; reading it from the start", followed.path)
            followed.offset = 0
        if length < FINGERPRINT_BYTES or head != followed.fingerprint:
            followed.fingerprint, followed.fingerprint_bytes = _fingerprint(
                followed.handle, FINGERPRINT_BYTES
            )

    def _read(self, followed: _Followed, max_lines: int) -> Chunk | None:
        handle = followed.handle
        handle.seek(followed.offset)
        data = handle.read(max(_READ_BYTES, self._max_line + 1))
        if not data:
            return None
        lines: list[bytes] = []
        oversize: list[bytes] = []
        consumed = 0
        while len(lines) + len(oversize) < max_lines:
            end = data.find(b"\n", consumed)
            if end < 0:
                rest = len(data) - consumed
                finished = not followed.matched
                if rest > self._max_line or (finished and rest > 0):
                    # A line over the limit, or the unterminated last line of a finished file.
                    piece = data[consumed : consumed + min(rest, self._max_line)]
                    (oversize if rest > self._max_line else lines).append(piece)
                    consumed = len(data)
                break
            line = data[consumed:end].rstrip(b"\r")
            if end - consumed > self._max_line:
                oversize.append(line[: self._max_line])
            else:
                lines.append(line)
            consumed = end + 1
        if consumed == 0:
            return None
        followed.offset += consumed
        return Chunk(
            partition={"file": followed.identity},
            position={
                "offset": followed.offset,
                "path": followed.path,
                "fingerprint": followed.fingerprint,
                "fingerprint_bytes": followed.fingerprint_bytes,
            },
            lines=lines,
            oversize=oversize,
        )
