"""Sessions of the web console, in the hub's database beside the API keys they stand for.

A session id is 256 random bits, returned once (for the browser's cookie) and stored only as its
SHA-256, so a copy of the table signs nobody in. A plain hash is enough, as for API keys: the id
is random, so there is no guessable preimage for a slow hash to protect.

A session ends at whichever comes first: `expires_at` (its absolute lifetime from sign-in), its
idle timeout after `last_seen_at`, the revocation of its key, or `delete` (sign-out). `get`
refuses a session past any of them and deletes it. Each `register` deletes up to `purge_batch`
ended rows, so the table stays bounded by the sign-ins of one lifetime while no sign-in pays for
more than one batch.
"""

import hashlib
import secrets
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, delete, or_, select
from sqlalchemy.orm import sessionmaker

from catalog.tables import ApiKeyRow, ConsoleSessionRow
from catalog.types import ConsoleSession, Principal, TeamName
from hub_core.database import transaction

# Longer than any id `register` makes (43 characters): a longer cookie is no session, and is
# refused before it is hashed or looked up.
MAX_SESSION_ID_CHARS = 128


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


def _utc(moment: datetime) -> datetime:
    """SQLite gives back naive datetimes; every time stored here is UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class SessionStore:
    """Register, get, list and delete console sessions; purge the ended ones."""

    def __init__(
        self,
        engine: Engine,
        *,
        lifetime: timedelta,
        idle_timeout: timedelta,
        purge_batch: int = 100,
    ) -> None:
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self._lifetime = lifetime
        self._idle_timeout = idle_timeout
        self._purge_batch = purge_batch
        # `last_seen_at` is written at most once a minute per session, not on every page: the
        # idle timeout is then late by at most this much, a tenth of itself when it is short.
        self._touch_after = min(timedelta(minutes=1), idle_timeout / 10)

    def register(
        self, *, principal: Principal, now: datetime | None = None
    ) -> tuple[str, ConsoleSession]:
        """A new session for `principal`; returns its id, available only now, and the session."""
        now = now or datetime.now(UTC)
        self.purge(now=now)
        session_id = secrets.token_urlsafe(32)
        row = ConsoleSessionRow(
            id_sha256=_digest(session_id),
            key_id=principal.key_id,
            team=principal.team,
            is_admin=principal.admin,
            created_at=now,
            expires_at=now + self._lifetime,
            last_seen_at=now,
        )
        with transaction(self._sessions) as session:
            session.add(row)
        return session_id, _session(row)

    def get(self, *, session_id: str, now: datetime | None = None) -> ConsoleSession | None:
        """The live session `session_id` names, or None; a session that has ended (expired,
        idle too long, or its key revoked) is deleted."""
        if not session_id or len(session_id) > MAX_SESSION_ID_CHARS:
            return None
        now = now or datetime.now(UTC)
        with transaction(self._sessions) as session:
            row = session.get(ConsoleSessionRow, _digest(session_id))
            if row is None:
                return None
            key = session.get(ApiKeyRow, row.key_id)
            if key is None or key.revoked_at is not None or self._ended(row, now):
                session.delete(row)
                return None
            if now - _utc(row.last_seen_at) >= self._touch_after:
                row.last_seen_at = now
            return _session(row)

    def delete(self, *, session_id: str) -> bool:
        """End the session `session_id` names; whether there was one."""
        if not session_id or len(session_id) > MAX_SESSION_ID_CHARS:
            return False
        with transaction(self._sessions) as session:
            result = session.execute(
                delete(ConsoleSessionRow).where(ConsoleSessionRow.id_sha256 == _digest(session_id))
            )
        return bool(getattr(result, "rowcount", 0))

    def purge(self, *, now: datetime | None = None) -> int:
        """Delete up to `purge_batch` ended sessions; returns how many went."""
        now = now or datetime.now(UTC)
        ended = (
            select(ConsoleSessionRow.id_sha256)
            .join(ApiKeyRow, ApiKeyRow.key_id == ConsoleSessionRow.key_id)
            .where(
                or_(
                    ConsoleSessionRow.expires_at <= now,
                    ConsoleSessionRow.last_seen_at <= now - self._idle_timeout,
                    ApiKeyRow.revoked_at.is_not(None),
                )
            )
            .limit(self._purge_batch)
        )
        with transaction(self._sessions) as session:
            result = session.execute(
                delete(ConsoleSessionRow).where(ConsoleSessionRow.id_sha256.in_(ended))
            )
        return int(getattr(result, "rowcount", 0) or 0)

    def _ended(self, row: ConsoleSessionRow, now: datetime) -> bool:
        return now >= _utc(row.expires_at) or now >= _utc(row.last_seen_at) + self._idle_timeout

    # Last in the class, so that `list` above means the builtin.
    def list(self, *, key_id: str | None = None) -> list[ConsoleSession]:
        """Every stored session (of `key_id`), oldest first, ended ones not yet purged too."""
        with transaction(self._sessions) as session:
            query = select(ConsoleSessionRow).order_by(ConsoleSessionRow.created_at)
            if key_id is not None:
                query = query.where(ConsoleSessionRow.key_id == key_id)
            return [_session(row) for row in session.scalars(query)]


def _session(row: ConsoleSessionRow) -> ConsoleSession:
    return ConsoleSession(
        principal=Principal(
            key_id=row.key_id,
            team=TeamName(row.team) if row.team else None,
            admin=row.is_admin,
        ),
        created_at=_utc(row.created_at),
        expires_at=_utc(row.expires_at),
        last_seen_at=_utc(row.last_seen_at),
    )
