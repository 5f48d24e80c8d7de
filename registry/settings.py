"""Settings of the registry component (environment prefix `HUB_REGISTRY_`)."""

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from registry.types import CompatibilityMode


def default_home() -> Path:
    """The local state directory: `HUB_HOME`, else `.hub` in the working directory."""
    import os

    return Path(os.environ.get("HUB_HOME", ".hub")).resolve()


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
