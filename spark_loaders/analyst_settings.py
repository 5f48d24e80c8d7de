"""Settings of the analyst server, the Spark Thrift Server (environment prefix `HUB_ANALYST_`)."""

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class AnalystSettings(BaseSettings):
    """Where the Thrift server listens (environment prefix `HUB_ANALYST_`)."""

    model_config = SettingsConfigDict(env_prefix="HUB_ANALYST_", extra="ignore")

    host: str = Field(
        default="127.0.0.1",
        description=(
            "Address the Thrift server binds to; loopback by default, since it has no "
            "authentication of its own."
        ),
    )
    port: int = Field(default=10000, ge=1, le=65535, description="HiveServer2 (binary) port.")
    start_timeout_seconds: float = Field(
        default=120.0, gt=0, description="How long to wait for the server to accept connections."
    )

    @property
    def jdbc_url(self) -> str:
        """The URL JDBC clients (beeline, DBeaver, the Hive JDBC driver) connect with."""
        return f"jdbc:hive2://{self.host}:{self.port}/default"
