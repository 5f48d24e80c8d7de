"""Schemas from the registry's Confluent-compatible REST API: writer schemas by id, the newest
version of a subject (the reader schema records are resolved to), compatibility checks.

Every request is a read, so a failure a retry can fix (no connection, a timeout, a 5xx or 429
answer) is retried with jittered exponential backoff, waiting at least what a `Retry-After`
asks, for a bounded time (`REGISTRY_BACKOFF`); then `RegistryUnavailable` (50302) is raised.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from hub_core.retries import Backoff, retry_after_seconds, retry_transient
from registry.types import SchemaId
from spark_loaders.errors import LoaderError, RegistryUnavailable

_MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
# About a minute of retries: a registry replica restarting, not a registry that is gone.
REGISTRY_BACKOFF = Backoff(initial_s=0.5, max_s=10.0, jitter_s=1.0, attempts=8, timeout_s=60.0)


@dataclass(frozen=True, slots=True)
class LatestSchema:
    """The newest registered version of a subject."""

    schema_id: SchemaId
    version: int
    text: str


@dataclass(frozen=True, slots=True)
class CompatibilityVerdict:
    """What the registry would say to registering a schema under a subject."""

    compatible: bool
    messages: tuple[str, ...]


class RegistryClient:
    """Registry reads over HTTP.

    Schemas by id are immutable and cached forever. A subject's latest version changes when a
    team registers a new one; it is cached for `latest_ttl_s` so that each micro-batch can ask
    for it without a request per batch, and a new version is seen within that time.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 10.0,
        latest_ttl_s: float = 5.0,
        backoff: Backoff = REGISTRY_BACKOFF,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), timeout=timeout_s, headers=headers, transport=transport
        )
        self._backoff = backoff
        self._by_id: dict[SchemaId, str] = {}
        self._latest: dict[str, tuple[float, LatestSchema | None]] = {}
        self._versions: dict[str, tuple[float, dict[SchemaId, str]]] = {}
        self._latest_ttl_s = latest_ttl_s

    def schema(self, schema_id: SchemaId) -> str | None:
        """The schema text of `schema_id`, or None when the registry does not know it."""
        if schema_id in self._by_id:
            return self._by_id[schema_id]
        response = self._get(f"/schemas/ids/{schema_id}", what=f"schema {schema_id}")
        if response.status_code == 404:
            return None
        text: str = response.json()["schema"]
        self._by_id[schema_id] = text
        return text

    def latest(self, subject: str, *, newer_than: SchemaId | None = None) -> LatestSchema | None:
        """The subject's newest version (None when the subject has none).

        Served from a short cache; `newer_than` forces a fresh read when the cached version's id
        is lower, as when a batch carries a writer schema registered after the last read.
        """
        cached = self._latest.get(subject)
        now = time.monotonic()
        if cached is not None and now - cached[0] < self._latest_ttl_s:
            value = cached[1]
            stale = newer_than is not None and (value is None or value.schema_id < newer_than)
            if not stale:
                return value
        response = self._get(f"/subjects/{subject}/versions/latest", what=f"subject {subject}")
        latest: LatestSchema | None = None
        if response.status_code != 404:
            body = response.json()
            latest = LatestSchema(SchemaId(body["id"]), int(body["version"]), body["schema"])
            self._by_id[latest.schema_id] = latest.text
        self._latest[subject] = (now, latest)
        return latest

    def writers(self, subject: str) -> dict[SchemaId, str]:
        """The schema ids and texts of the subject's versions (none when it has no version), as
        cached as `latest`: a version registered since shows within `latest_ttl_s`, or at once
        after `forget(subject)`."""
        cached = self._versions.get(subject)
        now = time.monotonic()
        if cached is not None and now - cached[0] < self._latest_ttl_s:
            return cached[1]
        # `subjectPrefix` matches longer names too: only the subject's own versions count.
        response = self._get(
            "/schemas", params={"subjectPrefix": subject}, what=f"the versions of {subject}"
        )
        listed = response.json() if response.status_code != 404 else []
        found = {SchemaId(i["id"]): i["schema"] for i in listed if i["subject"] == subject}
        self._by_id.update(found)
        self._versions[subject] = (now, found)
        return found

    def forget(self, subject: str) -> None:
        """Read the subject's versions and newest version afresh at the next ask."""
        self._versions.pop(subject, None)
        self._latest.pop(subject, None)

    def check(self, subject: str, schema_text: str) -> CompatibilityVerdict:
        """Whether the registry would accept `schema_text` under `subject` (its own level)."""
        response = self._request(
            lambda: self._http.post(
                f"/compatibility/subjects/{subject}/versions",
                params={"verbose": "true"},
                json={"schema": schema_text},
                headers={"Content-Type": _MEDIA_TYPE},
            ),
            what=f"a compatibility check of subject {subject}",
        )
        if response.status_code == 404:
            return CompatibilityVerdict(True, ("the subject has no versions yet",))
        body = response.json()
        if response.status_code >= 400:
            return CompatibilityVerdict(False, (str(body.get("message", body)),))
        return CompatibilityVerdict(bool(body["is_compatible"]), tuple(body.get("messages", [])))

    def close(self) -> None:
        self._http.close()

    def _get(self, path: str, *, what: str, params: dict[str, str] | None = None) -> httpx.Response:
        response = self._request(lambda: self._http.get(path, params=params), what=what)
        if response.status_code in (401, 403):
            raise LoaderError(
                f"The registry refused to serve {what} ({response.status_code}): "
                "reads need a key here; set HUB_LOADER_REGISTRY_KEY."
            )
        if response.status_code != 404:
            response.raise_for_status()
        return response

    def _request(self, send: Callable[[], httpx.Response], *, what: str) -> httpx.Response:
        """`send()`, retried while the registry is unreachable or answers 5xx or 429."""

        def once() -> httpx.Response:
            try:
                response = send()
            except httpx.TransportError as exc:
                raise RegistryUnavailable(
                    f"Schema registry at {self._http.base_url} is unreachable: {exc}. "
                    "Check HUB_LOADER_REGISTRY_URL."
                ) from exc
            if response.status_code >= 500 or response.status_code == 429:
                raise RegistryUnavailable(
                    f"Schema registry at {self._http.base_url} answered {response.status_code} "
                    f"to {what}: {response.text[:200]}",
                    retry_after_s=retry_after_seconds(response.headers.get("Retry-After")),
                )
            return response

        return retry_transient(once, backoff=self._backoff)
