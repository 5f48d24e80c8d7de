"""Teams and their API keys. Keys are random secrets stored only as SHA-256 hashes."""

import hashlib
import hmac
import re
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
_KEY_ID_BYTES = 6
_SECRET_BYTES = 32
# Every key `create_key` issues: the prefix, the key id (6 random bytes as lowercase hex), the
# secret (32 random bytes as unpadded URL-safe base64, which may hold `_` and `-`).
KEY_SHAPE = re.compile(r"hub_[0-9a-f]{12}_[A-Za-z0-9_-]{43}")


def well_formed(token: str) -> bool:
    """Whether `token` has the shape of a key this hub issues (length and alphabet): anything
    else is no key of the hub, whatever the database holds."""
    return KEY_SHAPE.fullmatch(token) is not None


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

    def create_key(
        self, *, team: TeamName | None, admin: bool = False, loader: bool = False
    ) -> tuple[ApiKey, str]:
        """A new key for `team`, an admin key, or a loader key (it only reads, KeyRole.LOADER);
        returns it with its token, shown only now."""
        if (team is not None) + admin + loader != 1:
            # The role is the stored team and admin flag (`key_role`): a key asked for with
            # neither would silently be a loader key.
            raise ValueError("a key is of one team, or admin=True, or loader=True")
        key_id = secrets.token_hex(_KEY_ID_BYTES)
        secret = secrets.token_urlsafe(_SECRET_BYTES)
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
        """The principal a token stands for, or None when it is unknown, wrong or revoked; a
        token without a key's shape is None without a database read."""
        if not well_formed(token):
            return None
        _prefix, _, rest = token.partition("_")
        key_id, _, secret = rest.partition("_")
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
