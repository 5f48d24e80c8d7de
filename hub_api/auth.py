"""Who is calling: API keys from `Authorization` headers and console sessions, and what a
caller may change."""

import base64
import binascii
from typing import Annotated

from fastapi import Depends, Request

from catalog.teams import well_formed
from catalog.types import KeyRole, Principal, TeamName
from connectors.control import ControlPlane
from hub_api.console_sessions import in_console
from hub_api.errors import Forbidden, Unauthenticated
from hub_api.services import hub_services
from hub_api.settings import AuthMode
from publish.feeds import FeedService

_ANONYMOUS_ADMIN = Principal(key_id="anonymous", team=None, admin=True)
# Where the request gate (hub_api/gate.py) leaves the caller it verified: a Principal, or None.
PRINCIPAL_SCOPE_KEY = "hub.principal"

_MALFORMED = (
    "The Authorization header holds no API key of this hub. A key is `hub_`, 12 hex digits, "
    "`_` and 43 characters of A-Z, a-z, 0-9, `_` and `-`, sent as `Authorization: Bearer "
    "<key>` (or as the password of Basic auth). Send a key made by `hub key create`, or no "
    "Authorization header at all for the reads that are public."
)
_NOT_VALID = (
    "The API key is not valid: no key of this hub has that id and secret, or it was revoked. "
    "Send a current key (`hub key list` shows the ids), or no Authorization header at all for "
    "the reads that are public."
)


def credentials(request: Request) -> str | None:
    """The API key the request's `Authorization` header carries, if any; none under the
    console's path, whose pages act for their session's key (`session_principal`).

    401 (40101) at once for an `Authorization` header that holds no key of the hub's shape
    (another scheme, bad Basic encoding, a token of another length or alphabet): a caller who
    sends credentials gets them checked, on public reads too, and text that cannot be a key
    costs no lookup.
    """
    if in_console(request.url.path):
        return None
    header = request.headers.get("authorization", "")
    if not header:
        return None
    token = _token_of(header)
    if token is None or not well_formed(token):
        raise Unauthenticated(_MALFORMED)
    return token


def _token_of(header: str) -> str | None:
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value:
        return value.strip()
    if scheme.lower() == "basic" and value:
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2] or None
    return None


def checked(request: Request, principal: Principal | None) -> Principal | None:
    """`principal`, the answer for the request's key; 401 (40101) when a key sent in the
    `Authorization` header did not verify (unknown or revoked), whatever the route, as for a
    malformed one: a caller who sends a key learns that it is wrong, rather than being served
    as anonymous."""
    if principal is None and request.headers.get("authorization"):
        raise Unauthenticated(_NOT_VALID)
    return principal


def session_principal(request: Request) -> Principal | None:
    """Under the console's path, the principal of the request's console session, or None
    without a live one (hub_api/console_sessions.py); it may wait on the database."""
    signed_in = hub_services(request.app).console_sessions.current(request)
    return signed_in.session.principal if signed_in is not None else None


def caller_of(request: Request) -> Principal | None:
    """The caller's principal, or None without a valid key (pages that sign in ask for one)."""
    return _caller(request)


def _caller(request: Request) -> Principal | None:
    services = hub_services(request.app)
    if services.settings.auth is AuthMode.DISABLED:
        return _ANONYMOUS_ADMIN
    if PRINCIPAL_SCOPE_KEY in request.scope:  # verified by the request gate already
        known: Principal | None = request.scope[PRINCIPAL_SCOPE_KEY]
        return known
    if in_console(request.url.path):
        return session_principal(request)
    token = credentials(request)
    if token is None:
        return None
    return checked(request, services.keys.verify(token))


def require_caller(request: Request) -> Principal:
    """The caller's principal; 401 without a valid key."""
    principal = _caller(request)
    if principal is None:
        raise Unauthenticated()
    return principal


async def require_reader(request: Request) -> Principal | None:
    """Reads pass when they are public; otherwise any valid key is needed.

    Async, so public reads skip a thread-pool hop; a key is verified from the cache, and from
    the database only once per key every HUB_API_KEY_CACHE_SECONDS.
    """
    principal = _caller(request)
    if principal is None and not hub_services(request.app).settings.public_reads:
        raise Unauthenticated()
    return principal


# Loader keys read schemas and change nothing (docs/adr/0060-a-loader-key-that-only-reads.md).
_LOADER_KEY = "the loader's key, which only reads"


def require_admin(principal: Principal, *, action: str) -> None:
    if not principal.admin:
        loader = f" This key is {_LOADER_KEY}." if principal.role is KeyRole.LOADER else ""
        raise Forbidden(f"Only an admin key may {action}.{loader}")


def require_owner(principal: Principal, owner: TeamName, *, what: str) -> None:
    """403 unless the caller is the owning team or an admin."""
    if not principal.may_write(owner):
        if principal.role is KeyRole.LOADER:
            whose = _LOADER_KEY
        else:
            whose = f"of team {principal.team!r}" if principal.team else "not a team key"
        raise Forbidden(
            f"{what} belongs to team '{owner}'; this key is {whose}. "
            "Use a key of the owning team or an admin key."
        )


def authorize_connector(control: ControlPlane, name: str, caller: Principal) -> None:
    """403 unless `caller` may control connector `name` (its owner team's key or an admin's);
    the console's actions pass the same check as the connectors API's."""
    owner = TeamName(control.describe(name).owner)
    require_owner(caller, owner, what=f"Connector '{name}'")


def subject_owner(feeds: FeedService, subject: str) -> tuple[TeamName | None, str]:
    """The team that owns a registry subject, and what the subject is (for messages).

    A feed's subjects (`<topic>-value`, `<topic>-key`) belong to the feed's team. Any other
    subject belongs to its domain: the team named like its first dot-separated segment, so that
    team `sales` owns `sales.customer_type`, and `sales.orders-value` before the feed exists.
    A subject without a domain (no dot) belongs to no team: only admins may write it.
    See docs/adr/0020-subject-ownership.md.
    """
    topic = subject.removesuffix("-value").removesuffix("-key")
    if topic != subject:
        feed = feeds.find(topic)
        if feed is not None:
            return feed.owner, f"Subject '{subject}' of feed '{topic}'"
    domain, dot, _rest = subject.partition(".")
    if not dot or not domain:
        return None, f"Subject '{subject}' (no '<domain>.' prefix)"
    return TeamName(domain), f"Subject '{subject}' of domain '{domain}'"


def require_subject_writer(request: Request, subject: str) -> Principal:
    """Registry writes to a subject need its owner team's key or an admin key (see
    `subject_owner`); 401 without a valid key, 403 with another team's."""
    principal = require_caller(request)
    if principal.admin:
        return principal
    owner, what = subject_owner(hub_services(request.app).feeds, subject)
    if owner is None:
        raise Forbidden(
            f"{what} belongs to no team; only an admin key may change it. Name subjects "
            "'<domain>.<name>' after your team, or use an admin key."
        )
    require_owner(principal, owner, what=what)
    return principal


def require_admin_caller(request: Request) -> Principal:
    """Registry-wide settings need an admin key."""
    principal = require_caller(request)
    require_admin(principal, action="change registry-wide settings")
    return principal


Caller = Annotated[Principal, Depends(require_caller)]
Reader = Annotated[Principal | None, Depends(require_reader)]
SubjectWriter = Annotated[Principal, Depends(require_subject_writer)]
Admin = Annotated[Principal, Depends(require_admin_caller)]
