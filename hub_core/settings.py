"""Helpers every component's settings class shares: the local state directory and readable
messages for invalid environment variables.

Each component keeps its own pydantic-settings class with its own `HUB_<COMPONENT>_` prefix.
"""

import os
from pathlib import Path

from pydantic import ValidationError
from pydantic_settings import BaseSettings


def default_home() -> Path:
    """The local state directory: `HUB_HOME`, else `.hub` in the working directory."""
    return Path(os.environ.get("HUB_HOME", ".hub")).resolve()


def invalid_settings_message(error: ValidationError) -> str | None:
    """What is wrong with the environment variables behind `error`, or None if the error did
    not come from a settings class. Names each variable and the rule it breaks, never its value
    (which may be a password)."""
    settings_class = _settings_class(error.title)
    if settings_class is None:
        return None
    prefix = str(settings_class.model_config.get("env_prefix", ""))
    problems = []
    for item in error.errors(include_url=False, include_input=False):
        field = "_".join(str(part) for part in item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        problems.append(f"{prefix}{field}".upper() + f": {message}" if field else message)
    return f"Invalid settings ({settings_class.__name__}): " + "; ".join(problems)


def _settings_class(name: str) -> type[BaseSettings] | None:
    pending: list[type[BaseSettings]] = [BaseSettings]
    while pending:
        cls = pending.pop()
        if cls.__name__ == name and cls is not BaseSettings:
            return cls
        pending.extend(cls.__subclasses__())
    return None
