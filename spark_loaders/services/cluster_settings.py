"""Settings of the local Spark standalone cluster (environment prefix `HUB_SPARK_`)."""

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from hub_core.settings import default_home


class ClusterSettings(BaseSettings):
    """Where the local standalone master and workers listen, and what each worker offers."""

    model_config = SettingsConfigDict(env_prefix="HUB_SPARK_", extra="ignore")

    home: Path = Field(
        default_factory=lambda: default_home() / "spark-cluster",
        description="State of the local cluster: pid files, logs, the workers' work folders.",
    )
    master_port: int = Field(
        default=7077, ge=1, le=65535, description="Port of the master (spark://127.0.0.1:PORT)."
    )
    master_webui_port: int = Field(
        default=8090,
        ge=1,
        le=65535,
        description="Port of the master's web UI (8080, Spark's default, is the hub API's).",
    )
    worker_webui_port: int = Field(
        default=8091,
        ge=1,
        le=65535,
        description="Web UI port of the first worker; worker N uses this port + N.",
    )
    workers: int = Field(default=2, ge=1, le=16, description="Workers `hub spark start` runs.")
    worker_cores: int = Field(default=1, ge=1, description="Cores each worker offers executors.")
    worker_memory: str = Field(
        default="1g", description="Memory each worker offers executors (one 1g executor fits)."
    )
    daemon_heap: str = Field(
        default="512m",
        description="Heap of the master and worker JVMs themselves (SPARK_DAEMON_MEMORY).",
    )

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"
