"""Who is calling: API keys from `Authorization` headers, and what they may write."""

import base64
import binascii
import threading
import time
from typing import Annotated

from fastapi import Depends, Request

from catalog.teams import TeamStore
from catalog.types import Principal, TeamName
from hub_api.errors import Forbidden, Unauthenticated
from hub_api.settings import ApiSettings, AuthMode
from publish.feeds import FeedService

_ANONYMOUS_ADMIN = Principal(key_id="anonymous", team=None, admin=True)
# Where the request gate (hub_api/gate.py) leaves the caller it verified: a Principal, or None.
PRINCIPAL_SCOPE_KEY = "hub.principal"
# The console's key cookie: HttpOnly, Secure, SameSite=Strict and sent only under its path, so
# a cookie never stands in for a key anywhere else (docs/adr/0036-web-console.md).
CONSOLE_PATH = "/console"
CONSOLE_KEY_COOKIE = "hub_console_key"


class KeyVerifier:
    """Verifies API keys against the catalog, remembering answers for a few seconds."""

    def __init__(self, teams: TeamStore, *, cache_seconds: float) -> None:
        self._teams = teams
        self._cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, Principal | None]] = {}
        self._lock = threading.Lock()

    def cached(self, token: str) -> tuple[bool, Principal | None]:
        """Whether the answer for `token` is remembered, and that answer; never waits on the
        database, so the event loop may call it."""
        with self._lock:
            hit = self._cache.get(token)
        if hit is not None and hit[0] > time.monotonic():
            return True, hit[1]
        return False, None

    def verify(self, token: str) -> Principal | None:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(token)
        if hit is not None and hit[0] > now:
            return hit[1]
        principal = self._teams.verify(token)
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[token] = (now + self._cache_seconds, principal)
        return principal


def credentials(request: Request) -> str | None:
    """The API key the request carries, if any: its `Authorization` header, or under the
    console's path its key cookie."""
    header = request.headers.get("authorization", "")
    if not header and _in_console(request.url.path):
        return request.cookies.get(CONSOLE_KEY_COOKIE) or None
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


def _in_console(path: str) -> bool:
    return path == CONSOLE_PATH or path.startswith(CONSOLE_PATH + "/")


def caller_of(request: Request) -> Principal | None:
    """The caller's principal, or None without a valid key (pages that sign in ask for one)."""
    return _caller(request)


def _caller(request: Request) -> Principal | None:
    settings: ApiSettings = request.app.state.api_settings
    if settings.auth is AuthMode.DISABLED:
        return _ANONYMOUS_ADMIN
    if PRINCIPAL_SCOPE_KEY in request.scope:  # verified by the request gate already
        known: Principal | None = request.scope[PRINCIPAL_SCOPE_KEY]
        return known
    token = credentials(request)
    if token is None:
        return None
    verifier: KeyVerifier = request.app.state.keys
    return verifier.verify(token)


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
    settings: ApiSettings = request.app.state.api_settings
    principal = _caller(request)
    if principal is None and not settings.public_reads:
        raise Unauthenticated()
    return principal


def require_admin(principal: Principal, *, action: str) -> None:
    if not principal.admin:
        raise Forbidden(f"Only an admin key may {action}.")


def require_owner(principal: Principal, owner: TeamName, *, what: str) -> None:
    """403 unless the caller is the owning team or an admin."""
    if not principal.may_write(owner):
        raise Forbidden(
            f"{what} belongs to team '{owner}'; this key is "
            f"{'of team ' + repr(principal.team) if principal.team else 'not a team key'}. "
            "Use a key of the owning team or an admin key."
        )


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
    feeds: FeedService = request.app.state.feeds
    owner, what = subject_owner(feeds, subject)
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
