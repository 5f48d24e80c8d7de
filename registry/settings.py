"""Settings of the registry component (environment prefix `HUB_REGISTRY_`)."""

from pathlib import Path

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from registry.types import CompatibilityMode


def default_home() -> Path:
    """The local state directory: `HUB_HOME`, else `.hub` in the working directory."""
    import os

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


class RegistrySettings(BaseSettings):
    """Where the registry keeps its schemas."""

    model_config = SettingsConfigDict(env_prefix="HUB_REGISTRY_", extra="ignore")

    database_url: str = Field(
        default_factory=lambda: f"sqlite:///{default_home() / 'registry.db'}",
        description=(
            "SQLAlchemy URL of the registry database: SQLite (the embedded default) or "
            "PostgreSQL (`postgresql+psycopg://user:password@host/db`) in production."
        ),
    )
    pool_size: int = Field(
        default=5, ge=1, description="Connections kept open per process (PostgreSQL)."
    )
    cache_seconds: float = Field(
        default=5.0,
        ge=0,
        description=(
            "How long a process trusts what other processes may change: whether a schema id is "
            "still in use, and a subject's latest version for publishing."
        ),
    )
    default_compatibility: CompatibilityMode = Field(
        default=CompatibilityMode.BACKWARD,
        description="Compatibility level of subjects and of the registry when none is set.",
    )
