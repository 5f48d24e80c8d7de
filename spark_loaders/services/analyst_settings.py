"""Settings of the analyst server, the Spark Thrift Server (environment prefix `HUB_ANALYST_`)."""

from enum import StrEnum, unique

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


@unique
class AnalystAuth(StrEnum):
    """How the Thrift server checks who connects."""

    # The password of a login is a hub API key, checked by the hub API (`GET /v1/whoami`).
    HUB_KEYS = "hub-keys"
    # Anyone who reaches the port may read every table: loopback only.
    NONE = "none"


class AnalystSettings(BaseSettings):
    """Where the Thrift server listens and how it checks logins (prefix `HUB_ANALYST_`)."""

    model_config = SettingsConfigDict(env_prefix="HUB_ANALYST_", extra="ignore")

    host: str = Field(
        default="127.0.0.1",
        description=(
            "Address the Thrift server binds to; loopback by default. Any other address needs "
            "HUB_ANALYST_AUTH=hub-keys."
        ),
    )
    port: int = Field(default=10000, ge=1, le=65535, description="HiveServer2 (binary) port.")
    auth: AnalystAuth = Field(
        default=AnalystAuth.HUB_KEYS,
        description=(
            "`hub-keys`: a login's password must be a hub API key (team or admin), checked by "
            "the hub API; `none`: no check, allowed only on a loopback HUB_ANALYST_HOST."
        ),
    )
    api_url: str = Field(
        default="http://127.0.0.1:8080",
        description="Base URL of the hub API that checks the API keys of logins.",
    )
    auth_timeout_seconds: float = Field(
        default=3.0, gt=0, le=60, description="How long one key check by the hub API may take."
    )
    auth_cache_seconds: int = Field(
        default=60,
        ge=0,
        le=3600,
        description=(
            "How long a verified key is trusted without asking the API again (only a hash of "
            "the key is kept): a revoked key is locked out within this time."
        ),
    )
    statement_timeout_seconds: int = Field(
        default=300,
        ge=1,
        le=86_400,
        description=(
            "How long one statement may run before the server cancels it "
            "(spark.sql.thriftServer.queryTimeout); a client may ask for less, never more."
        ),
    )
    max_result_mb: int = Field(
        default=256,
        ge=1,
        le=16_384,
        description=(
            "Largest result, in MiB of serialized rows, one statement may bring to the server "
            "(spark.driver.maxResultSize); a larger one fails with Spark's error naming it."
        ),
    )
    start_timeout_seconds: float = Field(
        default=120.0, gt=0, description="How long to wait for the server to accept connections."
    )
    snapshot_staleness_seconds: float = Field(
        default=0.0,
        ge=0,
        le=3600,
        description=(
            "How old a table's state a query may read while Delta refreshes it in the background "
            "(spark.databricks.delta.stalenessLimit). 0: every query first lists the table's "
            "log for new commits, which grows with the commits of the retention period."
        ),
    )

    @property
    def on_loopback(self) -> bool:
        """Whether only processes on this machine can reach the server."""
        return self.host in LOOPBACK_HOSTS

    @property
    def jdbc_url(self) -> str:
        """The URL JDBC clients (beeline, DBeaver, the Hive JDBC driver) connect with."""
        return f"jdbc:hive2://{self.host}:{self.port}/default"
