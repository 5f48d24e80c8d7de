"""Teams and their API keys. Keys are random secrets stored only as SHA-256 hashes."""

import hashlib
import hmac
import secrets
from datetime import UTC, datetime

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import sessionmaker

from catalog.errors import KeyNotFound, TeamExists, TeamNotFound
from catalog.tables import ApiKeyRow, TeamRow
from catalog.types import ApiKey, Principal, Team, TeamName
from hub_core.database import transaction

_PREFIX = "hub"


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class TeamStore:
    """Register and list teams; create, revoke and verify their API keys."""

    def __init__(self, engine: Engine) -> None:
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def register(self, *, name: TeamName) -> Team:
        try:
            with transaction(self._sessions) as session:
                row = TeamRow(name=name, created_at=datetime.now(UTC))
                session.add(row)
                return Team(name=name, created_at=row.created_at)
        except IntegrityError as exc:
            raise TeamExists(name) from exc

    def create_key(self, *, team: TeamName | None, admin: bool = False) -> tuple[ApiKey, str]:
        """A new key for `team` (or an admin key); returns it with its token, shown only now."""
        key_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        with transaction(self._sessions) as session:
            if team is not None and session.get(TeamRow, team) is None:
                raise TeamNotFound(team)
            row = ApiKeyRow(
                key_id=key_id,
                team=team,
                is_admin=admin,
                secret_sha256=_digest(secret),
                created_at=datetime.now(UTC),
            )
            session.add(row)
        return _key(row), f"{_PREFIX}_{key_id}_{secret}"

    def revoke(self, *, key_id: str) -> ApiKey:
        with transaction(self._sessions) as session:
            row = session.get(ApiKeyRow, key_id, with_for_update=True)
            if row is None:
                raise KeyNotFound(key_id)
            if row.revoked_at is None:
                row.revoked_at = datetime.now(UTC)
            return _key(row)

    def keys(self, *, team: TeamName | None = None) -> list[ApiKey]:
        with transaction(self._sessions) as session:
            query = select(ApiKeyRow).order_by(ApiKeyRow.created_at)
            if team is not None:
                query = query.where(ApiKeyRow.team == team)
            return [_key(r) for r in session.scalars(query)]

    def verify(self, token: str) -> Principal | None:
        """The principal a token stands for, or None when it is unknown, wrong or revoked."""
        prefix, _, rest = token.partition("_")
        key_id, _, secret = rest.partition("_")
        if prefix != _PREFIX or not key_id or not secret:
            return None
        with transaction(self._sessions) as session:
            row = session.get(ApiKeyRow, key_id)
            if row is None or row.revoked_at is not None:
                return None
            if not hmac.compare_digest(row.secret_sha256, _digest(secret)):
                return None
            return Principal(
                key_id=row.key_id,
                team=TeamName(row.team) if row.team else None,
                admin=row.is_admin,
            )

    # Last in the class, so that `list` above means the builtin.
    def list(self) -> list[Team]:
        with transaction(self._sessions) as session:
            rows = session.scalars(select(TeamRow).order_by(TeamRow.name))
            return [Team(name=TeamName(r.name), created_at=r.created_at) for r in rows]


def _key(row: ApiKeyRow) -> ApiKey:
    return ApiKey(
        key_id=row.key_id,
        team=TeamName(row.team) if row.team else None,
        admin=row.is_admin,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )
