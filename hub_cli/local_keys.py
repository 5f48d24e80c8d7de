"""The local hub's private state: `HUB_HOME` readable by its user alone, and the API keys
`hub up` issues there, each in a file of mode 0600.

`hub up` keeps two keys: the admin key (`admin.key`), for the person at the terminal and the
demo's publisher, and the loader's (`loader.key`), which reads schemas and changes nothing
(`KeyRole.LOADER`), so a loader that runs a team's bad record or SQL holds no right to change
a feed, a schema or a setting.
"""

import logging
import os
import secrets
import stat
from pathlib import Path

from catalog.teams import TeamStore
from catalog.types import KeyRole
from hub_cli.errors import StackError

log = logging.getLogger(__name__)

PRIVATE_DIRECTORY = 0o700
_ROLE_FILES = {KeyRole.ADMIN: "admin.key", KeyRole.LOADER: "loader.key"}


def private_home(home: Path) -> Path:
    """Create `home` with mode 0700, or take away every bit of group and others it has.

    It holds the keys, the registry database, the Kafka login and the logs; other users of the
    machine could read them through a folder they may enter. A folder of another user is
    refused: its owner could read what the hub writes there, whatever its mode.
    """
    home.mkdir(mode=PRIVATE_DIRECTORY, parents=True, exist_ok=True)
    info = home.stat()
    if info.st_uid != os.geteuid():
        raise StackError(
            f"HUB_HOME ({home}) belongs to user id {info.st_uid}, not to you ({os.geteuid()}): "
            "`hub up` keeps its keys there, so it must be a folder of your own. Set HUB_HOME "
            "to one, or run `hub up` as its owner."
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        log.info("making %s private to its user (mode 0700)", home)
        home.chmod(stat.S_IMODE(info.st_mode) & PRIVATE_DIRECTORY)
    return home


def key_file(home: Path, role: KeyRole) -> Path:
    """Where `hub up` keeps the key of `role` (admin or loader)."""
    return home / _ROLE_FILES[role]


def local_key(teams: TeamStore, path: Path, *, role: KeyRole) -> str:
    """The local hub's key of `role`: kept in `path` (mode 0600), made anew if missing, revoked,
    of another role, or readable by others."""
    if path.exists():
        token = path.read_text().strip()
        principal = teams.verify(token)
        if principal is not None and principal.role is role:
            if not path.stat().st_mode & 0o077:
                return token
            # Readable by others (made by hand, or by an older hub): the key may have been
            # read already, so it is revoked and replaced, not just chmod-ed.
            log.warning("%s was readable by other users; replacing the %s key", path, role)
            teams.revoke(key_id=principal.key_id)
    key, token = teams.create_key(
        team=None, admin=role is KeyRole.ADMIN, loader=role is KeyRole.LOADER
    )
    write_secret(path, token + "\n")
    log.info("created %s key %s (in %s)", role, key.key_id, path)
    return token


def write_secret(path: Path, text: str) -> None:
    """Write `path` with mode 0600, atomically: other users can never read it, and a reader
    sees the old file or the whole new one, never a part.

    The text goes to a new file created 0600 (`O_EXCL`, so never one an attacker placed) in the
    same directory, then replaces `path`; a file already at `path` is replaced, whatever its
    mode, never written into.
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    descriptor = os.open(temporary, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(descriptor, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
