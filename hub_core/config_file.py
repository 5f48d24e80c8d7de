"""One file that describes a deployment: `HUB_CONFIG_FILE` names a file of `HUB_*=value` lines.

Every component reads its settings from `HUB_<COMPONENT>_*` environment variables. On a cluster
that is a dozen variables spread over five components: the Kafka bootstrap servers and their
security, the registry database, the tables' storage URIs, the Spark master and the metastore.
The config file puts them in one place (see docs/production.md): `hub` reads it at start and sets
each variable it holds that the environment does not already set, so a variable set in the
environment wins over the file, and every process `hub` starts inherits the result.

The file is read as a dotenv file (`NAME=value`, `#` comments, quotes as in a shell). Only
`HUB_*` names are allowed. A file that holds secrets (passwords, keys, credential-bearing URLs)
must be readable by its owner only, as an ssh key must; better still, it names secret files
(`HUB_KAFKA_SASL_PASSWORD_FILE`) and holds no secret at all.
"""

import os
import re
import stat
from collections.abc import MutableMapping
from pathlib import Path

from dotenv import dotenv_values

from hub_core.environment import is_secret
from hub_core.errors import ErrorCode, TerminalError

CONFIG_FILE_VARIABLE = "HUB_CONFIG_FILE"
_NAME = re.compile(r"^HUB_[A-Z0-9_]+$")


class InvalidConfigFile(TerminalError):
    """The config file is missing, unreadable, or holds something it must not."""

    code = ErrorCode.INVALID_SETTING


def read_config_file(path: Path) -> dict[str, str]:
    """The settings in the file at `path`, checked; never logs or shows a value."""
    where = f"{CONFIG_FILE_VARIABLE} ({path})"
    if not path.is_file():
        raise InvalidConfigFile(f"{where}: no such file")
    try:
        values = dotenv_values(path, interpolate=False)
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidConfigFile(f"{where}: cannot be read: {type(error).__name__}") from None
    settings: dict[str, str] = {}
    for name, value in values.items():
        if not _NAME.match(name) or name == CONFIG_FILE_VARIABLE:
            raise InvalidConfigFile(f"{where}: {name!r} is not a hub setting (HUB_*)")
        if value is None:
            raise InvalidConfigFile(f"{where}: {name} has no value (write {name}=...)")
        settings[name] = value
    secrets = sorted(name for name in settings if is_secret(name))
    if secrets and path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise InvalidConfigFile(
            f"{where} holds secrets ({', '.join(secrets)}) but others can read it: "
            f"chmod 600 it, or name secret files (e.g. HUB_KAFKA_SASL_PASSWORD_FILE) instead"
        )
    return settings


def apply_config_file(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Set the variables of the file `HUB_CONFIG_FILE` names that `environ` (default: this
    process's environment) does not set. Returns the settings the file provided and were used;
    nothing when no file is named."""
    environ = os.environ if environ is None else environ
    named = environ.get(CONFIG_FILE_VARIABLE, "").strip()
    if not named:
        return {}
    used = {}
    for name, value in read_config_file(Path(named).expanduser()).items():
        if name not in environ:
            environ[name] = value
            used[name] = value
    return used
