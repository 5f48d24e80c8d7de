"""Stored answers of publish requests, so a retried request is answered, not published again."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, delete
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import sessionmaker

from catalog.errors import IdempotencyKeyInUse, IdempotencyKeyReused
from catalog.tables import IdempotencyRow
from hub_core.database import transaction


@dataclass(frozen=True, slots=True)
class StoredAnswer:
    status_code: int
    body: str


class IdempotencyStore:
    """One row per (scope, key): in progress while the first request runs, then its answer.

    A request that crashed mid-way leaves an in-progress row; after `stale_after` a retry may
    take it over. Records the crashed request had already published are then published again:
    the guarantee holds for every request that was answered.
    """

    def __init__(self, engine: Engine, *, stale_after: timedelta = timedelta(minutes=2)) -> None:
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._stale_after = stale_after

    def begin(self, *, scope: str, key: str, request_sha256: str) -> StoredAnswer | None:
        """Claim the key for this request, or return the answer a previous one got."""
        now = datetime.now(UTC)

        def claim() -> IdempotencyRow:
            return IdempotencyRow(
                scope=scope, idempotency_key=key, request_sha256=request_sha256, created_at=now
            )

        try:
            with transaction(self._sessions) as session:
                session.add(claim())
            return None
        except IntegrityError:
            pass
        with transaction(self._sessions) as session:
            row = session.get(IdempotencyRow, (scope, key), with_for_update=True)
            if row is None:  # the holder abandoned it in between
                session.add(claim())
                return None
            if row.request_sha256 != request_sha256:
                raise IdempotencyKeyReused(key)
            if row.status_code is not None and row.response is not None:
                return StoredAnswer(status_code=row.status_code, body=row.response)
            created = (
                row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=UTC)
            )
            if now - created < self._stale_after:
                raise IdempotencyKeyInUse(key)
            row.created_at = now
            return None

    def complete(self, *, scope: str, key: str, status_code: int, body: str) -> None:
        """Record the answer given to the request holding the key."""
        with transaction(self._sessions) as session:
            row = session.get(IdempotencyRow, (scope, key))
            if row is not None:
                row.status_code = status_code
                row.response = body

    def abandon(self, *, scope: str, key: str) -> None:
        """Release the key of a request that published nothing, so a retry runs again."""
        with transaction(self._sessions) as session:
            session.execute(
                delete(IdempotencyRow).where(
                    IdempotencyRow.scope == scope,
                    IdempotencyRow.idempotency_key == key,
                    IdempotencyRow.status_code.is_(None),
                )
            )
