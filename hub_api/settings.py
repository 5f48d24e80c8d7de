"""Settings of the API server (environment prefix `HUB_API_`)."""

import os
import socket
from enum import StrEnum, unique
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
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
        "waiting in an unbounded queue. A request takes its slot once its body has arrived.",
    )
    header_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="Most seconds a request's line and headers may take to arrive, from the "
        "connection's opening or the request's first byte (`hub api serve`); past it, 408 "
        "(code 40801) and the connection is closed.",
    )
    max_header_bytes: int = Field(
        default=64 * 1024,
        ge=1024,
        description="Most bytes of a request's line and headers (`hub api serve`); a head "
        "still unfinished past it is answered 431 (code 43101) and its connection closed.",
    )
    body_timeout_seconds: float = Field(
        default=120.0,
        gt=0,
        description="Most seconds a request's whole body may take to arrive, from when the "
        "API starts reading it; past it the request is answered 408 (code 40801) and its "
        "connection closed.",
    )
    body_idle_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="Most seconds a request's body may pause with no bytes arriving; past it "
        "the request is answered 408 (code 40801) and its connection closed.",
    )
    body_drain_bytes: int = Field(
        default=8 * 1024 * 1024,
        ge=0,
        description="Most bytes of a body the API reads and drops when it answers before "
        "reading the body (401, 403, 413, 429, 503), so that a client that sends its whole "
        "body before reading gets the answer; the connection of a longer body is closed.",
    )
    max_buffered_body_bytes: int = Field(
        default=256 * 1024 * 1024,
        ge=1024,
        description="Most bytes of request bodies one API worker holds at once (received for "
        "requests not yet answered); a body that would go over it is answered 503 (code "
        "50306) with `Retry-After`. At least HUB_API_MAX_BODY_BYTES.",
    )
    max_anonymous_body_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        description="Of max_buffered_body_bytes, most bytes one API worker holds at once for "
        "requests without a valid key (the console's sign-in, public registry lookups and "
        "checks), so that they cannot fill what teams need; over it, 503 (code 50306).",
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
    max_feed_description_bytes: int = Field(
        default=4096,
        ge=1,
        description="Longest description a feed may have, in bytes of UTF-8 (422, code 42222, "
        "above, when a feed is created or changed). Every description is served to every reader "
        "of `GET /v1/feeds`, so it is a summary; longer documentation belongs in a link.",
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
    console_session_seconds: float = Field(
        default=8 * 3600,
        gt=0,
        description="How long a web console sign-in lasts at most (the session's absolute "
        "lifetime, and its cookie's Max-Age); then the person signs in again.",
    )
    console_idle_seconds: float = Field(
        default=30 * 60,
        gt=0,
        description="How long a web console session may go unused before it ends (it is "
        "renewed by use at most once a minute).",
    )
    console_origin: str | None = Field(
        default=None,
        pattern=r"^https?://[^/?#\s]+$",
        description="The web console's origin as browsers see it (`https://hub.example.com`), "
        "which every console form must come from; unset: the origin of each request's `Host` "
        "header. Set it when a proxy in front of the API rewrites `Host`.",
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

    @model_validator(mode="after")
    def _a_largest_body_fits_the_buffers(self) -> "ApiSettings":
        if self.max_buffered_body_bytes < self.max_body_bytes:
            raise ValueError(
                f"HUB_API_MAX_BUFFERED_BODY_BYTES ({self.max_buffered_body_bytes}) is smaller "
                f"than HUB_API_MAX_BODY_BYTES ({self.max_body_bytes}): no body of the largest "
                "size could ever be read. Raise the first or lower the second."
            )
        return self
