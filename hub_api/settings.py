"""Settings of the API server (environment prefix `HUB_API_`)."""

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ApiSettings(BaseSettings):
    """How the API server listens and what one publish request may carry."""

    model_config = SettingsConfigDict(env_prefix="HUB_API_", extra="ignore")

    host: str = Field(default="127.0.0.1", description="Interface the API server binds to.")
    port: int = Field(default=8080, ge=1, le=65535, description="Port of the API server.")
    max_records_per_request: int = Field(
        default=10_000, ge=1, description="Most records one publish request may carry."
    )
