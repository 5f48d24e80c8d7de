"""Stored answers of publish requests, so a retried request is answered, not published again."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, delete, select, tuple_
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import sessionmaker

from catalog.errors import IdempotencyKeyInUse, IdempotencyKeyReused
from catalog.tables import IdempotencyRow
from hub_core.database import transaction

# How long an answer is kept by default (`HUB_API_IDEMPOTENCY_TTL_SECONDS`).
DEFAULT_TTL = timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class StoredAnswer:
    status_code: int
    body: str


class IdempotencyStore:
    """One row per (scope, key): in progress while the first request runs, then its answer.

    A request that crashed mid-way leaves an in-progress row; after `stale_after` a retry may
    take it over. Records the crashed request had already published are then published again:
    the guarantee holds for every request that was answered.

    Rows expire `ttl` after the request claimed the key: an expired row counts as absent, so a
    retry after that publishes again. Each new claim purges up to `purge_batch` expired rows
    (oldest first, found by the index on `created_at`), so the table stays bounded by the
    traffic of one `ttl` while no request pays for more than one batch.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        stale_after: timedelta = timedelta(minutes=2),
        ttl: timedelta = DEFAULT_TTL,
        purge_batch: int = 100,
    ) -> None:
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._stale_after = stale_after
        self._ttl = ttl
        self._purge_batch = purge_batch

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
        except IntegrityError:
            pass
        else:
            self.purge(now=now)
            return None
        with transaction(self._sessions) as session:
            row = session.get(IdempotencyRow, (scope, key), with_for_update=True)
            if row is None:  # the holder abandoned it in between
                session.add(claim())
                return None
            created = (
                row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=UTC)
            )
            if now - created >= self._ttl:  # expired, not purged yet: as if absent
                row.request_sha256 = request_sha256
                row.status_code = None
                row.response = None
                row.created_at = now
                return None
            if row.request_sha256 != request_sha256:
                raise IdempotencyKeyReused(key)
            if row.status_code is not None and row.response is not None:
                return StoredAnswer(status_code=row.status_code, body=row.response)
            if now - created < self._stale_after:
                raise IdempotencyKeyInUse(key)
            row.created_at = now
            return None

    def purge(self, *, now: datetime | None = None) -> int:
        """Delete up to `purge_batch` expired rows, oldest first; returns how many went."""
        cutoff = (now or datetime.now(UTC)) - self._ttl
        expired = IdempotencyRow.created_at < cutoff
        oldest = (
            select(IdempotencyRow.scope, IdempotencyRow.idempotency_key)
            .where(expired)
            .order_by(IdempotencyRow.created_at)
            .limit(self._purge_batch)
        )
        with transaction(self._sessions) as session:
            # `expired` again in the DELETE: a row re-claimed meanwhile is not expired any more.
            result = session.execute(
                delete(IdempotencyRow).where(
                    expired,
                    tuple_(IdempotencyRow.scope, IdempotencyRow.idempotency_key).in_(oldest),
                )
            )
        return int(getattr(result, "rowcount", 0) or 0)

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
