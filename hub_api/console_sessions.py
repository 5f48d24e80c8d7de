"""The web console's sessions at the HTTP edge: its cookies, and the checks every form passes.

Signing in exchanges an API key for a session (`catalog.sessions.SessionStore`, in the hub's
database, so every worker and replica sees it): the browser's cookie holds only the session's
random id, and the key is forgotten once checked. The session cookie is `HttpOnly`, `Secure`,
`SameSite=Strict`, `Path=/console`, with a `Max-Age` of the session's lifetime. Sign-out
deletes the session's row, so a copy of the cookie signs nobody in afterwards.

Every console POST passes two checks against cross-site request forgery before it changes
anything, else it is answered 403 (40310, `FormRefused`):

- its `Origin` header, or without one its `Referer`, is the console's own origin:
  HUB_API_CONSOLE_ORIGIN, or else the scheme and `Host` the request came with (and `https` on
  that host, for a TLS proxy in front of an API that sees plain HTTP). A request with neither
  header is refused: browsers send `Origin` with every form POST.
- its form carries the console's form token (`csrf_token`). For a signed-in browser it is an
  HMAC of the session id, so it is bound to the session and no page of another session, or
  of no session, has it. Before sign-in there is no session yet, so the sign-in form (and
  every form while HUB_API_AUTH=disabled, which has no sessions) carries the value of the
  `hub_console_form` cookie instead, a double-submitted random value: a page on another site
  can neither read that cookie nor set it along with the form. A server secret would do the
  same for sign-in, but every replica would then need it; the cookie needs nothing shared.

See docs/adr/0059-console-sessions.md.
"""

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import NamedTuple
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from catalog.sessions import SessionStore
from catalog.types import ConsoleSession, Principal
from hub_api.settings import ApiSettings
from hub_core.errors import ErrorCode, TerminalError

CONSOLE_PATH = "/console"
SESSION_COOKIE = "hub_console_session"
FORM_COOKIE = "hub_console_form"
FORM_FIELD = "csrf_token"
# Where `ConsoleSessions.current` leaves the request's session, looked up once per request.
SESSION_SCOPE_KEY = "hub.console_session"
_DEFAULT_PORTS = {"http": 80, "https": 443}
_TOKEN_LABEL = b"hub console form token"
# A form cookie this console could have set (`secrets.token_urlsafe`); anything else is replaced.
_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{32,128}")


class FormRefused(TerminalError):
    """A console form that may come from another site: refused before it changes anything."""

    code = ErrorCode.CONSOLE_FORM_REFUSED


@dataclass(frozen=True, slots=True)
class SignedIn:
    """The session a request's cookie names, with the id from that cookie (kept in memory
    for the request only: the form token is derived from it)."""

    session_id: str
    session: ConsoleSession


class FormToken(NamedTuple):
    value: str
    new_cookie: bool  # whether `value` must be set as the form cookie with the page


class Origin(NamedTuple):
    scheme: str
    host: str
    port: int


def in_console(path: str) -> bool:
    """Whether `path` is one of the console's."""
    return path == CONSOLE_PATH or path.startswith(CONSOLE_PATH + "/")


def origin_of(url: str) -> Origin | None:
    """The origin of an absolute http(s) URL, default port filled in; None for anything else
    (`null`, other schemes, malformed ports)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return Origin(parts.scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[parts.scheme])


def _session_token(session_id: str) -> str:
    digest = hmac.new(session_id.encode("utf-8"), _TOKEN_LABEL, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


class ConsoleSessions:
    """Starts, finds and ends console sessions, and checks the console's forms."""

    def __init__(self, store: SessionStore, settings: ApiSettings) -> None:
        self._store = store
        self._lifetime = timedelta(seconds=settings.console_session_seconds)
        self._origin = origin_of(settings.console_origin) if settings.console_origin else None

    def start(self, response: Response, principal: Principal) -> None:
        """A new session for `principal`, its id set as the session cookie of `response`."""
        session_id, _session = self._store.register(principal=principal)
        max_age = max(1, int(self._lifetime.total_seconds()))
        _set_cookie(response, SESSION_COOKIE, session_id, max_age=max_age)
        _clear_cookie(response, FORM_COOKIE)  # of no use until sign-out

    def current(self, request: Request) -> SignedIn | None:
        """The live session of the request's cookie, looked up once per request (it may wait
        on the database: call it from a thread)."""
        if SESSION_SCOPE_KEY in request.scope:
            known: SignedIn | None = request.scope[SESSION_SCOPE_KEY]
            return known
        session_id = request.cookies.get(SESSION_COOKIE, "")
        session = self._store.get(session_id=session_id) if session_id else None
        found = SignedIn(session_id, session) if session is not None else None
        request.scope[SESSION_SCOPE_KEY] = found
        return found

    def end(self, request: Request, response: Response) -> None:
        """Delete the request's session, if any, and clear its cookie with `response`."""
        session_id = request.cookies.get(SESSION_COOKIE, "")
        if session_id:
            self._store.delete(session_id=session_id)
        request.scope[SESSION_SCOPE_KEY] = None
        _clear_cookie(response, SESSION_COOKIE)

    @staticmethod
    def forget(response: Response) -> None:
        """Clear the session cookie with `response` (its session has ended already)."""
        _clear_cookie(response, SESSION_COOKIE)

    def form_token(self, request: Request, *, before_sign_in: bool = False) -> FormToken:
        """The token the page's forms carry: the session's, or before sign-in (and without a
        session) the form cookie's value, a new one when the browser has none."""
        signed_in = None if before_sign_in else self.current(request)
        if signed_in is not None:
            return FormToken(_session_token(signed_in.session_id), new_cookie=False)
        value = request.cookies.get(FORM_COOKIE, "")
        if _TOKEN_SHAPE.fullmatch(value):
            return FormToken(value, new_cookie=False)
        return FormToken(secrets.token_urlsafe(32), new_cookie=True)

    @staticmethod
    def keep_form_cookie(response: Response, token: FormToken) -> None:
        """Set the form cookie with `response` when `token` is a new one."""
        if token.new_cookie:
            _set_cookie(response, FORM_COOKIE, token.value)

    def check_origin(self, request: Request) -> None:
        """403 (40310) unless the request comes from the console's own origin."""
        sent = request.headers.get("origin")
        header = "Origin"
        if sent is None:
            sent, header = request.headers.get("referer"), "Referer"
        if sent is None:
            raise FormRefused(
                "This console form came without an Origin or Referer header, so the hub cannot "
                "tell that it was sent from the console's own pages; nothing was changed. Send "
                "it from the console in a browser, and do not let a proxy strip Origin."
            )
        origin = origin_of(sent)
        own = self._own_origins(request)
        if origin is None or origin not in own:
            expected = ", ".join(sorted(f"{o.scheme}://{o.host}:{o.port}" for o in own))
            raise FormRefused(
                f"This console form was sent from {sent[:200]!r} ({header}), which is not the "
                f"console's own origin ({expected or 'unknown: the request has no Host'}); "
                "nothing was changed. Use the console's own pages; if a proxy in front of the "
                "API rewrites the Host header, set HUB_API_CONSOLE_ORIGIN to the address "
                "browsers use."
            )

    def check_token(self, request: Request, fields: dict[str, list[str]], *,
                    before_sign_in: bool = False) -> None:  # fmt: skip
        """403 (40310) unless the form carries the token `form_token` gave its page."""
        sent = (fields.get(FORM_FIELD) or [""])[0]
        signed_in = None if before_sign_in else self.current(request)
        if signed_in is not None:
            expected = _session_token(signed_in.session_id)
        else:
            cookie = request.cookies.get(FORM_COOKIE, "")
            expected = cookie if _TOKEN_SHAPE.fullmatch(cookie) else ""
        # As bytes: `compare_digest` refuses strings with non-ASCII characters, which a forged
        # form may well send.
        if not sent or not expected or not hmac.compare_digest(sent.encode(), expected.encode()):
            raise FormRefused(
                f"This console form carries no valid form token ({FORM_FIELD}): it was not "
                "sent from a page of this browser's console session, or the page is older "
                "than the session. Nothing was changed; reload the page and send the form "
                "again."
            )

    def _own_origins(self, request: Request) -> set[Origin]:
        if self._origin is not None:
            return {self._origin}
        host = request.headers.get("host")
        if not host:
            return set()
        # https on the same host too: behind a proxy that ends TLS, the API sees plain HTTP
        # while the browser's Origin says https.
        schemes = {request.url.scheme, "https"}
        found = (origin_of(f"{scheme}://{host}") for scheme in schemes)
        return {origin for origin in found if origin is not None}


# Every console cookie: unreadable by scripts, sent over HTTPS (and to localhost) only, with no
# request from another site, and under the console's path only. `Secure` is set whatever the
# request's scheme: behind a proxy that ends TLS the API sees plain HTTP, and browsers keep
# Secure cookies for http://localhost anyway.
def _set_cookie(response: Response, name: str, value: str, *, max_age: int | None = None) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=CONSOLE_PATH,
        httponly=True,
        secure=True,
        samesite="strict",
    )


def _clear_cookie(response: Response, name: str) -> None:
    response.delete_cookie(name, path=CONSOLE_PATH, httponly=True, secure=True, samesite="strict")
