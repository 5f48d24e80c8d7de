"""Building a connector's source through its plugin, and the secret texts to mask in its logs."""

from typing import Any

from pydantic import BaseModel, SecretStr

from connectors.config import LoadedConnector
from connectors.plugins import PLUGINS
from connectors.runtime import Source


def build_source(loaded: LoadedConnector) -> Source:
    """A new source for the connector (a restart builds a fresh one)."""
    return PLUGINS[loaded.config.type].build_source(loaded.config)


def secret_values(loaded: LoadedConnector) -> list[str]:
    """Every secret text of a connector (SecretStr fields, values from `${VAR}`), to mask."""
    found: list[str] = []
    _collect(loaded.config, found)
    for path in loaded.secret_paths:
        value: Any = loaded.config.model_dump(by_alias=True)
        for part in path.split("."):
            if isinstance(value, dict):
                value = value.get(part)
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                value = None
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if isinstance(value, str) and value:
            found.append(value)
    # Longest first, so a password inside a URL is masked as part of the whole URL.
    return sorted(set(found), key=len, reverse=True)


def _collect(value: Any, found: list[str]) -> None:
    if isinstance(value, SecretStr):
        secret = value.get_secret_value()
        if secret:
            found.append(secret)
            found.extend(_url_password(secret))
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            _collect(getattr(value, name), found)
    elif isinstance(value, list | tuple):
        for item in value:
            _collect(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _collect(item, found)


def _url_password(url: str) -> list[str]:
    """The password inside a URL, which drivers may quote on its own in their errors."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        password = make_url(url).password
    except (ArgumentError, ValueError):
        return []
    return [str(password)] if password else []
