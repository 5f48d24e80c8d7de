"""Response model of `GET /v1/whoami`."""

from pydantic import BaseModel, Field

from catalog.types import KeyRole, Principal


class WhoAmIPublic(BaseModel):
    """Whom an API key belongs to; never the key itself."""

    key_id: str = Field(description="The public part of the key (`hub key list` shows it).")
    team: str | None = Field(description="The key's team; null for an admin key.")
    admin: bool = Field(description="Whether the key is an admin key.")
    role: KeyRole = Field(
        description="`team` (its team's feeds and subjects), `admin` (everything) or `loader` "
        "(reads only: the loader's key)."
    )

    @classmethod
    def of(cls, principal: Principal) -> "WhoAmIPublic":
        return cls(
            key_id=principal.key_id,
            team=principal.team,
            admin=principal.admin,
            role=principal.role,
        )
