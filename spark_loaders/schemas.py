"""Writer schemas by id, from the registry's Confluent-compatible REST API."""

import httpx

from registry.types import SchemaId
from spark_loaders.errors import LoaderError


class RegistryClient:
    """Fetches schemas by id over HTTP; ids are immutable, so answers are cached forever."""

    def __init__(self, base_url: str, *, timeout_s: float = 10.0) -> None:
        self._http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout_s)
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
        response.raise_for_status()
        text: str = response.json()["schema"]
        self._by_id[schema_id] = text
        return text

    def close(self) -> None:
        self._http.close()
