"""Settings of the registry component (environment prefix `HUB_REGISTRY_`)."""

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from hub_core.settings import default_home
from registry.types import CompatibilityMode


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
