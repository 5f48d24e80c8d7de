"""The request gate: what every request passes before a route runs.

An ASGI middleware, in front of the body size limit, so that a request's cost is bounded before
anything of it is read (write slots and the body's time limits are `RequestBodies`', in front of
this, hub_api/bodies.py):

- a request with an API key is held to that key's rate (`TokenBuckets`), or answered 429
  (42901) with `Retry-After`;
- a request whose `Authorization` header holds no valid key is answered 401 (40101) at once,
  on public reads too; one that cannot be a key at all costs no lookup.

The key found is kept in the request's scope (`PRINCIPAL_SCOPE_KEY`), so the routes' own
dependencies do not look it up again; they, and `CheckedBodyRoute` before it reads a body,
decide whether the key may do what it asks (hub_api/limits.py).
"""

import logging
import math
import time

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from catalog.types import KeyRole, Principal
from hub_api.auth import PRINCIPAL_SCOPE_KEY, checked, credentials, session_principal
from hub_api.console_sessions import in_console
from hub_api.errors import error_response, media_type_of
from hub_api.services import hub_services
from hub_api.settings import ApiSettings, AuthMode
from hub_core.errors import ErrorCode, HubError

log = logging.getLogger(__name__)


class TokenBuckets:
    """One token bucket per API key, in this worker: `rate` tokens a second, at most `burst`.

    Hand-written rather than taken from `limits` (the usual library): `limits` counts requests
    in fixed or moving windows over a storage backend, while a bucket lets a quiet key send a
    burst and then holds it to its rate, in a few lines of arithmetic over a dict. Only the
    event loop calls it, so it needs no lock; keys are verified ones, so the dict holds at most
    one entry per live key.
    """

    def __init__(self, *, rate: float, burst: float) -> None:
        self._rate = rate
        self._burst = burst
        self._buckets: dict[str, tuple[float, float]] = {}  # key id -> (tokens, when)

    def take(self, key: str) -> float:
        """Take a token for `key`: 0 when there was one, else the seconds until there is."""
        now = time.monotonic()
        tokens, then = self._buckets.get(key, (self._burst, now))
        tokens = min(self._burst, tokens + (now - then) * self._rate)
        if tokens >= 1:
            self._buckets[key] = (tokens - 1, now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1 - tokens) / self._rate


class RequestGate:
    """ASGI middleware: the caller's key, and that key's rate limit."""

    def __init__(self, app: ASGIApp, *, settings: ApiSettings) -> None:
        self._app = app
        self._settings = settings
        self._rates = TokenBuckets(
            rate=settings.rate_limit_per_second, burst=settings.rate_limit_burst
        )
        admin_rate = settings.admin_rate_limit_per_second
        self._admin_rates = (
            TokenBuckets(rate=admin_rate, burst=max(admin_rate, settings.rate_limit_burst))
            if admin_rate
            else None
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        await self._admitted(scope, receive, send)

    async def _admitted(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The rate limit of the caller's key, then the app."""
        if self._settings.auth is AuthMode.DISABLED:
            await self._app(scope, receive, send)
            return
        request = Request(scope)
        try:
            principal = await self._principal(request)
        except HubError as exc:  # credentials that are no valid key: 401; no key store: 503
            await self._refuse(scope, receive, send, exc.code, exc.message)
            return
        if principal is not None:
            wait_s = self._rate_wait(principal)
            if wait_s:
                await self._rate_limited(scope, receive, send, wait_s)
                return
        await self._app(scope, receive, send)

    async def _principal(self, request: Request) -> Principal | None:
        """The caller's verified key, from the cache or (in a thread) the database; kept in the
        scope for the route's dependencies. 401 for credentials that are no valid key, before
        any route runs (hub_api/auth.py, `credentials` and `checked`)."""
        token = credentials(request)
        principal = None
        if token is not None:
            verifier = hub_services(request.app).keys
            known, principal = verifier.cached(token)
            if not known:
                principal = await run_in_threadpool(verifier.verify, token)
            principal = checked(request, principal)
        elif in_console(request.url.path):  # a console page: its session's key, if signed in
            principal = await run_in_threadpool(session_principal, request)
        request.scope[PRINCIPAL_SCOPE_KEY] = principal
        return principal

    def _rate_wait(self, principal: Principal) -> float:
        # The loader's key asks for every feed's schemas when the loader starts: it is held to
        # the admin keys' rate (none by default), as it was when the loader used an admin key.
        if principal.role is not KeyRole.TEAM:
            return self._admin_rates.take(principal.key_id) if self._admin_rates else 0.0
        return self._rates.take(principal.key_id)

    async def _rate_limited(
        self, scope: Scope, receive: Receive, send: Send, wait_s: float
    ) -> None:
        retry_after = max(1, math.ceil(wait_s))
        response = error_response(
            ErrorCode.RATE_LIMITED,
            f"Too many requests with this API key: at most "
            f"{self._settings.rate_limit_per_second:g} a second, in bursts of "
            f"{self._settings.rate_limit_burst} (HUB_API_RATE_LIMIT_PER_SECOND, "
            f"HUB_API_RATE_LIMIT_BURST; admin keys: HUB_API_ADMIN_RATE_LIMIT_PER_SECOND). "
            f"Retry after {retry_after} s.",
            media_type=media_type_of(Request(scope)),
        )
        response.headers["Retry-After"] = str(retry_after)
        await response(scope, receive, send)

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, code: ErrorCode, message: str
    ) -> None:
        response = error_response(code, message, media_type=media_type_of(Request(scope)))
        await response(scope, receive, send)
