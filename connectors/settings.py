"""Settings of connector processes (environment prefix `HUB_CONNECT_`)."""

import os
import socket
from dataclasses import dataclass

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from hub_kafka.settings import KafkaSettings
from registry.settings import RegistrySettings


def _default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class ConnectSettings(BaseSettings):
    """Where connectors keep their positions and share their state, and how they retry."""

    model_config = SettingsConfigDict(env_prefix="HUB_CONNECT_", extra="ignore")

    worker_id: str = Field(
        default_factory=_default_worker_id,
        description="Name of this connector process in status answers (default host:pid).",
    )
    offsets_topic: str = Field(
        default="_hub_connect_offsets",
        description="Compacted topic holding each connector's source positions.",
    )
    configs_topic: str = Field(
        default="_hub_connect_configs",
        description="Compacted topic holding connector configurations and their target states.",
    )
    status_topic: str = Field(
        default="_hub_connect_status",
        description="Compacted topic holding the state of every connector and its tasks.",
    )
    heartbeat_seconds: float = Field(
        default=10.0,
        gt=0,
        description=(
            "How often a running connector rewrites its status; the API reports a connector "
            "whose status is older than three heartbeats as UNASSIGNED."
        ),
    )
    publish_retries: int = Field(
        default=5,
        ge=0,
        description=(
            "Retries of a batch Kafka did not acknowledge before the task starts its source "
            "again from the stored position (itself a retry, within `retry_limit_seconds`)."
        ),
    )
    retry_backoff_seconds: float = Field(
        default=2.0,
        gt=0,
        description=(
            "Wait before the first retry of a transient failure; doubles on each retry, plus a "
            "random jitter of up to one second."
        ),
    )
    retry_backoff_max_seconds: float = Field(
        default=30.0, gt=0, description="Longest wait between two retries of a transient failure."
    )
    health_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="Port of the worker's /healthz and /readyz (Kubernetes probes); unset: "
        "not served.",
    )
    health_host: str = Field(
        default="127.0.0.1",
        description="Interface of the health endpoints; 0.0.0.0 in a pod, for the kubelet.",
    )
    retry_limit_seconds: float = Field(
        default=300.0,
        gt=0,
        description=(
            "How long a connector task keeps retrying transient failures (its source or Kafka "
            "unavailable) without making progress before it gives up and is FAILED. While it "
            "retries, its state stays RUNNING and its status carries `retry`."
        ),
    )
    max_snapshot_processes: int = Field(
        default_factory=lambda: os.cpu_count() or 1,
        ge=1,
        description=(
            "Most processes one connector's snapshot may use (`snapshot_processes` in its file "
            "is cut to this), so that no connector file takes the worker's host from the others "
            "(default: the host's cores)."
        ),
    )
    max_stream_processes: int = Field(
        default_factory=lambda: os.cpu_count() or 1,
        ge=1,
        description=(
            "Most processes one connector's stream may use (`stream_processes` in its file is "
            "cut to this), so that no connector file takes the worker's host from the others "
            "(default: the host's cores)."
        ),
    )
    gc_threshold: int = Field(
        default=50_000,
        ge=0,
        description=(
            "Allocations between the interpreter's youngest garbage collections in `hub connect "
            "run` (CPython's default is 700, which the thousands of records a connector holds "
            "until Kafka acknowledges them trigger again and again); 0 keeps CPython's default."
        ),
    )


@dataclass(frozen=True)
class PublishSettings:
    """The settings a connector process wired its publish path with: what a helper process
    (a share of a CDC snapshot) needs to wire its own, the same way."""

    registry: RegistrySettings
    kafka: KafkaSettings
    connect: ConnectSettings
