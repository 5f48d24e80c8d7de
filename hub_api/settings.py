"""Settings of the API server (environment prefix `HUB_API_`)."""

import os
import socket
from enum import StrEnum, unique
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from hub_core.settings import default_home


@unique
class AuthMode(StrEnum):
    REQUIRED = "required"  # writes need an API key of the owning team, or an admin key
    DISABLED = "disabled"  # every request acts as an admin (a single-user local hub)


class ApiSettings(BaseSettings):
    """How the API server listens, who may do what, and what one request may carry."""

    model_config = SettingsConfigDict(env_prefix="HUB_API_", extra="ignore")

    host: str = Field(default="127.0.0.1", description="Interface the API server binds to.")
    port: int = Field(default=8080, ge=1, le=65535, description="Port of the API server.")
    workers: int = Field(
        default=1,
        ge=1,
        description="Server processes (`hub api serve`); each is a full, stateless API.",
    )
    gc_threshold: int = Field(
        default=50_000,
        ge=0,
        description="Allocations between the interpreter's youngest garbage collections in "
        "`hub api serve` (CPython's default is 700, which a publish request's thousands of "
        "short-lived objects trigger dozens of times); 0 keeps CPython's default.",
    )
    auth: AuthMode = Field(
        default=AuthMode.REQUIRED,
        description=(
            "`required`: publishing, feed administration and registry writes need an API key "
            "(`Authorization: Bearer <key>`, or Basic auth with the key as password); "
            "`disabled`: no keys, every caller is an admin."
        ),
    )
    public_reads: bool = Field(
        default=True,
        description="Whether reads (GET) work without a key; false requires any valid key.",
    )
    max_records_per_request: int = Field(
        default=10_000, ge=1, description="Most records one publish request may carry."
    )
    max_body_bytes: int = Field(
        default=16 * 1024 * 1024, ge=1024, description="Largest request body accepted (413 above)."
    )
    max_json_depth: int = Field(
        default=64,
        ge=8,
        description="Deepest nesting of arrays and objects a JSON request body may have (400, "
        "code 40001, above); checked before the body is parsed.",
    )
    transactional_producers: int = Field(
        default=2, ge=1, description="Concurrent atomic (transactional) publish requests."
    )
    instance_id: str = Field(
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}",
        description="Unique name of this API process; prefixes its Kafka transactional ids.",
    )
    idempotency_ttl_seconds: float = Field(
        default=86_400,
        ge=300,
        description="How long the answer to a request with an `Idempotency-Key` is kept: a "
        "retry within this time gets it again, a retry after it publishes again.",
    )
    max_concurrent_requests: int = Field(
        default=64,
        ge=1,
        description="Most write requests (POST, PUT, PATCH, DELETE) one API worker serves at "
        "once; past it a new one is answered 503 (code 50304) with `Retry-After` instead of "
        "waiting in an unbounded queue.",
    )
    rate_limit_per_second: float = Field(
        default=100.0,
        gt=0,
        description="Requests per second one API key may send to one API worker, on average "
        "(429, code 42901, with `Retry-After` above); a token bucket per key per worker.",
    )
    rate_limit_burst: int = Field(
        default=200,
        ge=1,
        description="Requests one API key may send at once, above its rate, before it is "
        "limited (the token bucket's size).",
    )
    admin_rate_limit_per_second: float = Field(
        default=0.0,
        ge=0,
        description="Rate limit of admin keys, in requests per second (burst: the same "
        "number, at least HUB_API_RATE_LIMIT_BURST); 0 exempts admin keys.",
    )
    quota_feeds_per_team: int = Field(
        default=100,
        ge=1,
        description="Most feeds one team may own (422, code 42229, for one more).",
    )
    quota_partitions_per_feed: int = Field(
        default=64,
        ge=1,
        description="Most partitions a new feed may ask for (422, code 42230, above).",
    )
    lineage_source: Literal["warehouse", "loader"] = Field(
        default="warehouse",
        description="Where the lineage index reads the loader's Delta logs: `warehouse`, the "
        "folder lineage_warehouse_dir, which this API can read; `loader`, the loader's "
        "`GET /ledger` (loader_url and loader_token), for a warehouse on object storage or on "
        "the loader's own volume (docs/lineage.md).",
    )
    lineage_warehouse_dir: Path = Field(
        default_factory=lambda: default_home() / "warehouse",
        description="The loader's warehouse folder (its HUB_LOADER_WAREHOUSE_DIR, local): the "
        "lineage index reads the Delta logs of the tables under it (docs/lineage.md), with "
        "lineage_source `warehouse`.",
    )
    key_cache_seconds: float = Field(
        default=5.0,
        ge=0,
        description="How long a verified API key is trusted before it is checked again "
        "(a revoked key stops working within this time).",
    )
    loader_url: str | None = Field(
        default=None,
        description="Base URL of the loader's health port (e.g. http://127.0.0.1:8091), whose "
        "/status, /plan and /replay the console and `POST /v1/feeds/{topic}/replay` use; unset: "
        "the console shows no loader figures and replay answers 503 (code 50350).",
    )
    loader_token: SecretStr | None = Field(
        default=None,
        description="The loader's control token (its HUB_LOADER_CONTROL_TOKEN), sent as a "
        "bearer token to loader_url.",
    )
    loader_timeout_seconds: float = Field(
        default=1.0,
        gt=0,
        description="How long a console page waits for the loader's status before it shows "
        "'loader unreachable' (a replay waits up to loader_replay_timeout_seconds).",
    )
    loader_replay_timeout_seconds: float = Field(
        default=120.0,
        gt=0,
        description="How long a replay may take in the loader (a Spark job) before the API "
        "gives up waiting (the replay goes on; running it again lands nothing twice).",
    )
