"""The API's client of the loader's `/status`, `/plan`, `/replay`, `/row` and `/ledger`
(spark_loaders/control/status.py).

The console's pages must stay fast when the loader is slow or gone: a status read waits at most
`HUB_API_LOADER_TIMEOUT_SECONDS` (1 s), and its answer, or the failure, is kept for a few
seconds, so a page shown to many people asks the loader at most once in that time. A page
whose read failed shows "loader unreachable"; it never fails itself.

The feeds API and the console replay a feed's quarantine through it (`replay_result`: the
loader's answer checked to be a `ReplayPublic`), and the lineage answers find silver and gold
rows and read the loader's ledger through it.
"""

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import BaseModel, Field

from hub_api.settings import ApiSettings
from hub_core.errors import ErrorCode, HubError, TransientError
from hub_core.ledger import Commit, LoggedTable, decode
from hub_core.naming import TopicName, table_suffix

log = logging.getLogger(__name__)

# The loader refreshes its status every 30 s by default: a few seconds of cache lose nothing.
STATUS_CACHE_S = 5.0


class LoaderNotConfigured(TransientError):
    code = ErrorCode.LOADER_NOT_CONFIGURED

    def __init__(self) -> None:
        super().__init__(
            "This API knows no loader: set HUB_API_LOADER_URL (the loader's health port) and "
            "HUB_API_LOADER_TOKEN (its HUB_LOADER_CONTROL_TOKEN). `hub up` sets both."
        )


class LoaderUnreachable(TransientError):
    code = ErrorCode.LOADER_UNREACHABLE


@dataclass(frozen=True, slots=True)
class LoaderStatusRead:
    """The loader's `/status` body, or why there is none."""

    body: dict[str, Any] | None
    problem: str | None  # "loader unreachable: ..." when body is None

    def table(self, layer: str, name: str) -> dict[str, Any] | None:
        for table in (self.body or {}).get("tables", []):
            if table.get("layer") == layer and table.get("table") == name:
                return dict(table)
        return None

    def feed(self, topic: str) -> dict[str, Any] | None:
        """The feed's entry, its quarantine counted from `quarantine.<topic>` when the loader
        has not followed the topic since it started (no lag, no state yet)."""
        found: dict[str, Any] | None = None
        for feed in (self.body or {}).get("feeds", []):
            if feed.get("topic") == topic:
                found = dict(feed)
        held = self.table("quarantine", table_suffix(TopicName(topic)))
        if found is None and held is not None:
            found = {"topic": topic, "quarantined": held.get("rows") or 0,
                     "quarantined_by_reason": held.get("by_reason") or {}}  # fmt: skip
        return found


class LoaderClient:
    """One per app, made in its lifespan; thread-safe."""

    def __init__(self, settings: ApiSettings, *, transport: httpx.BaseTransport | None = None):
        self._url = (settings.loader_url or "").rstrip("/")
        token = settings.loader_token.get_secret_value() if settings.loader_token else ""
        self._timeout = settings.loader_timeout_seconds
        self._replay_timeout = settings.loader_replay_timeout_seconds
        self._http = httpx.Client(
            base_url=self._url or "http://loader.invalid",
            headers={"Authorization": f"Bearer {token}"},
            transport=transport,
        )
        self._lock = threading.Lock()
        self._cached: tuple[float, LoaderStatusRead] | None = None

    @property
    def configured(self) -> bool:
        return bool(self._url)

    def status(self) -> LoaderStatusRead:
        """The loader's status, from a cache of a few seconds; never raises."""
        if not self.configured:
            return LoaderStatusRead(None, "no loader configured (HUB_API_LOADER_URL)")
        with self._lock:
            if self._cached is not None and time.monotonic() - self._cached[0] < STATUS_CACHE_S:
                return self._cached[1]
        try:
            read = LoaderStatusRead(self._call("GET", "/status", timeout=self._timeout), None)
        except HubError as exc:
            read = LoaderStatusRead(None, f"loader unreachable: {exc.message}")
        with self._lock:
            self._cached = (time.monotonic(), read)
        return read

    def plan(self, topic: str, candidate: str | None) -> dict[str, Any]:
        """The loader's plan of `candidate` (None: the latest registered) for `bronze.<topic>`."""
        method = "POST" if candidate is not None else "GET"
        return self._call(method, "/plan", params={"topic": topic}, content=candidate,
                          timeout=max(self._timeout, 10.0))  # fmt: skip

    def replay(self, topic: str) -> dict[str, Any]:
        """Replay the feed's quarantine in the loader; its result."""
        body = self._call("POST", "/replay", params={"topic": topic}, timeout=self._replay_timeout)
        with self._lock:
            self._cached = None  # the next page shows the replay's outcome
        return body

    def row(self, table: str, key: dict[str, Any]) -> tuple[int, int]:
        """The `_hub_partition` and `_hub_offset` of the silver row of `table` with `key`."""
        body = self._call("GET", "/row", params={"table": table, "key": json.dumps(key)},
                          timeout=max(self._timeout, 30.0))  # fmt: skip
        partition, offset = body.get("partition"), body.get("offset")
        if not isinstance(partition, int) or not isinstance(offset, int):
            raise LoaderUnreachable(f"The loader answered the row of {table} unreadably.")
        return partition, offset

    def ledger_tables(self) -> dict[str, LoggedTable]:
        """The loader's tables with ledger entries: where each lives, its newest version."""
        body = self._call("GET", "/ledger", timeout=max(self._timeout, 30.0))
        try:
            return {
                str(t["table"]): LoggedTable(str(t["location"]), _optional_int(t["newest"]))
                for t in body["tables"]
            }
        except (KeyError, TypeError, ValueError) as exc:
            raise LoaderUnreachable("The loader answered its tables' ledger unreadably.") from exc

    def ledger_commits(self, table: str, after: int) -> tuple[str, list[Commit], bool]:
        """Where `table` lives, its commits after version `after` (a page of them), and
        whether there are more."""
        body = self._call("GET", "/ledger", params={"table": table, "after": str(after)},
                          timeout=max(self._timeout, 30.0))  # fmt: skip
        try:
            commits = [
                Commit(
                    int(c["version"]),
                    int(c["timestamp_ms"]),
                    str(c["operation"]),
                    decode(c["user_metadata"]),
                    str(c["table_id"]) if c.get("table_id") is not None else None,
                )
                for c in body["commits"]
            ]
            return str(body["location"]), commits, bool(body["more"])
        except (KeyError, TypeError, ValueError) as exc:
            raise LoaderUnreachable(
                f"The loader answered the ledger of {table} unreadably."
            ) from exc

    def close(self) -> None:
        self._http.close()

    def _call(
        self,
        method: str,
        path: str,
        *,
        timeout: float,
        params: dict[str, str] | None = None,
        content: str | None = None,
    ) -> dict[str, Any]:
        """The loader's JSON answer; a HubError with the loader's own code for its 4xx, else
        LoaderUnreachable (never the token, never an unexpected exception)."""
        if not self.configured:
            raise LoaderNotConfigured()
        try:
            response = self._http.request(
                method, path, params=params, content=content, timeout=timeout
            )
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise LoaderUnreachable(
                f"The loader at {self._url} did not answer {path} within {timeout:g} s "
                f"({type(exc).__name__}). Check that it runs with its health port there."
            ) from exc
        if not isinstance(body, dict):
            raise LoaderUnreachable(f"The loader at {self._url} answered {path} with no object.")
        if response.status_code == 200:
            return body
        code, message = body.get("error_code"), str(body.get("message") or "")
        if response.status_code in (401, 403) or code == ErrorCode.LOADER_CONTROL_DISABLED:
            # The API's own setup is wrong, not the caller's request: say what to fix.
            log.warning("the loader refused the API's control token: %s", message)
            raise LoaderUnreachable(
                f"The loader at {self._url} refused the API ({message}) Set HUB_API_LOADER_TOKEN "
                "to the loader's HUB_LOADER_CONTROL_TOKEN."
            )
        known = {int(c) for c in ErrorCode}
        if isinstance(code, int) and code in known:
            raise HubError(message, code=ErrorCode(code))
        raise LoaderUnreachable(f"The loader failed {path}: {message or response.status_code}.")


class ReplayPublic(BaseModel):
    """What replaying a feed's quarantine did (`hub load replay TOPIC` prints the same)."""

    topic: str = Field(description="The feed whose `quarantine.<topic>` was replayed.")
    examined: int = Field(description="Quarantined records decoded again.")
    landed: int = Field(description="Records that decode now and landed in `bronze.<topic>`.")
    still_failing: dict[str, int] = Field(
        description="Records still quarantined, by reason code (with their new reason)."
    )
    message: str = Field(description="The outcome in one sentence.")


def replay_result(loader: LoaderClient, topic: str) -> dict[str, Any]:
    """The loader's replay of `topic`, checked to be the shape the API answers with."""
    body = loader.replay(topic)
    try:
        ReplayPublic.model_validate(body)
    except ValueError as exc:
        raise LoaderUnreachable(f"The loader answered the replay of {topic} unreadably.") from exc
    return body


class LoaderLedger:
    """The lineage index's `LedgerSource` when the API cannot read the loader's warehouse (on
    object storage, or on the loader's own volume): the loader reads its Delta logs for it
    (`GET /ledger`, ADR 0048)."""

    def __init__(self, client: LoaderClient) -> None:
        self._client = client

    def tables(self) -> dict[str, LoggedTable]:
        return self._client.ledger_tables()

    def commits(self, table: str, location: str, after: int) -> list[Commit]:
        commits: list[Commit] = []
        more = True
        while more:
            try:
                found, page, more = self._client.ledger_commits(table, after)
            except HubError as exc:
                if exc.code is ErrorCode.LINEAGE_NOT_FOUND:
                    return []  # dropped since it was listed
                raise
            if found != location:
                return []  # moved since it was listed (a reprocessing swap): the next sync
            commits += page
            if page:
                after = page[-1].version
            more = more and bool(page)
        return commits


def _optional_int(value: object) -> int | None:
    return None if value is None else int(str(value))
