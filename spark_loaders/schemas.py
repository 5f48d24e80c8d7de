"""Writer schemas by id, from the registry's Confluent-compatible REST API."""

import httpx

from registry.types import SchemaId
from spark_loaders.errors import LoaderError


class RegistryClient:
    """Fetches schemas by id over HTTP; ids are immutable, so answers are cached forever."""

    def __init__(
        self, base_url: str, *, api_key: str | None = None, timeout_s: float = 10.0
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout_s, headers=headers)
        self._by_id: dict[SchemaId, str] = {}

    def schema(self, schema_id: SchemaId) -> str | None:
        """The schema text of `schema_id`, or None when the registry does not know it."""
        if schema_id in self._by_id:
            return self._by_id[schema_id]
        try:
            response = self._http.get(f"/schemas/ids/{schema_id}")
        except httpx.HTTPError as exc:
            raise LoaderError(
                f"Schema registry at {self._http.base_url} is unreachable: {exc}. "
                "Check HUB_LOADER_REGISTRY_URL."
            ) from exc
        if response.status_code == 404:
            return None
        if response.status_code in (401, 403):
            raise LoaderError(
                f"The registry refused to serve schema {schema_id} ({response.status_code}): "
                "reads need a key here; set HUB_LOADER_REGISTRY_KEY."
            )
        response.raise_for_status()
        text: str = response.json()["schema"]
        self._by_id[schema_id] = text
        return text

    def close(self) -> None:
        self._http.close()
