"""Settings of the registry component (environment prefix `HUB_REGISTRY_`)."""

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from hub_core.settings import default_home
from registry.schema_rules import SchemaLimits
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
            "How long a process trusts what another process may change where seeing it late is "
            "harmless: a subject's latest version for publishing, and feeds."
        ),
    )
    default_compatibility: CompatibilityMode = Field(
        default=CompatibilityMode.BACKWARD,
        description="Compatibility level of subjects and of the registry when none is set.",
    )
    max_schema_bytes: int = Field(
        default=256 * 1024,
        ge=1024,
        description=(
            "Largest schema text the registry accepts, in bytes (UTF-8), checked before the "
            "text is parsed. Larger: 42201."
        ),
    )
    max_schema_depth: int = Field(
        default=32,
        ge=1,
        description=(
            "Deepest nesting of records, arrays and maps in one another that a schema may have "
            "(unions do not count). Deeper: 42201."
        ),
    )
    max_schema_fields: int = Field(
        default=2_000,
        ge=1,
        description="Most fields a schema may have, counting the fields of all its records.",
    )
    max_enum_symbols: int = Field(
        default=1_000, ge=1, description="Most symbols one enum of a schema may have."
    )
    max_schema_references: int = Field(
        default=100, ge=0, description="Most references (to other subjects) one schema may have."
    )
    parse_cache_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=0,
        description=(
            "Memory for parsed schemas (registering, compatibility checks, publishing), per "
            "cache and process, estimated at 16 bytes per character of schema text; the least "
            "recently used are dropped first."
        ),
    )
    read_cache_bytes: int = Field(
        default=96 * 1024 * 1024,
        ge=0,
        description=(
            "Memory for answers to `GET /schemas/ids/{id}` and lookups, per process, as the size "
            "of the schema texts they hold, and a quarter of it each for whether ids are in use "
            "and for the identities of schema texts (256 bytes an entry: about 98,000 at the "
            "default). Answers that deletions change are used only while no process has written "
            "to the registry's database since they were read."
        ),
    )

    def schema_limits(self) -> SchemaLimits:
        """The bounds on schemas the registry accepts."""
        return SchemaLimits(
            max_bytes=self.max_schema_bytes,
            max_depth=self.max_schema_depth,
            max_fields=self.max_schema_fields,
            max_enum_symbols=self.max_enum_symbols,
            max_references=self.max_schema_references,
        )
