"""A lean door to the publish route: `POST /v1/feeds/{topic}/records` without FastAPI's routing.

At one record per request, the framework's work around the route (matching the path against
every route, resolving the route's dependencies, validating its query and header parameters,
a thread-pool hand-off for the key check) cost more CPU than checking, encoding and producing
the record. This ASGI middleware sits inside the request gate and the body size limit, so write
slots, rate limits, key verification and the size limit apply as to any request; it recognises
the publish path itself and calls `publish_request`, the same function the FastAPI route calls.

It serves only requests it reads exactly as FastAPI would; anything else goes on to FastAPI,
which answers it as before: other paths and methods, a root path, query parameters other than
one `on_error` (`reject`, `dlq`) and one `atomic` (`true`, `false`), an `Idempotency-Key` longer
than its limit. See docs/adr/0031-lean-publish-lane.md.
"""

from urllib.parse import parse_qsl

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from hub_api.auth import PRINCIPAL_SCOPE_KEY, require_caller
from hub_api.errors import hub_error_response
from hub_api.gateway.routes import RECORDS_PATH, publish_request
from hub_api.metrics import name_route
from hub_api.services import HubServices, hub_services
from hub_api.settings import AuthMode
from hub_core.errors import HubError
from publish.publisher import OnError

_PREFIX = "/v1/feeds/"
_SUFFIX = "/records"
_MAX_IDEMPOTENCY_KEY = 255  # as the route's `Idempotency-Key` header parameter
_ON_ERROR = {"reject": OnError.REJECT, "dlq": OnError.DLQ}
_ATOMIC = {"true": True, "false": False}


class PublishLane:
    """ASGI middleware serving plain publish requests directly (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._services: HubServices | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        topic = _topic(scope) if scope["type"] == "http" and scope["method"] == "POST" else None
        options = _options(scope["query_string"]) if topic is not None else None
        if topic is None or options is None:
            await self._app(scope, receive, send)
            return
        request = Request(scope, receive)
        idempotency_key = request.headers.get("idempotency-key")
        if idempotency_key is not None and len(idempotency_key) > _MAX_IDEMPOTENCY_KEY:
            await self._app(scope, receive, send)  # FastAPI words the validation error
            return
        name_route(scope, RECORDS_PATH)
        if self._services is None:  # the app's services exist once its lifespan started
            self._services = hub_services(request.app)
        try:
            # The request gate verified the key and left the caller in the scope; without
            # it, verifying may read the database.
            if PRINCIPAL_SCOPE_KEY in scope or self._services.settings.auth is AuthMode.DISABLED:
                caller = require_caller(request)
            else:
                caller = await run_in_threadpool(require_caller, request)
            on_error, atomic = options
            response = await publish_request(
                self._services,
                request,
                topic,
                caller,
                on_error=on_error,
                atomic=atomic,
                idempotency_key=idempotency_key,
            )
        except HubError as exc:
            response = hub_error_response(request, exc)
        await response(scope, receive, send)


def _topic(scope: Scope) -> str | None:
    """The `{topic}` of a publish path, as FastAPI's router would match it."""
    path: str = scope["path"]
    if scope.get("root_path") or not path.startswith(_PREFIX) or not path.endswith(_SUFFIX):
        return None
    topic = path[len(_PREFIX) : -len(_SUFFIX)]
    return topic if topic and "/" not in topic else None


def _options(query_string: bytes) -> tuple[OnError, bool] | None:
    """`on_error` and `atomic` from the query, or None when FastAPI should read it."""
    if not query_string:
        return OnError.REJECT, False
    pairs = parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
    found = dict(pairs)
    if len(found) != len(pairs) or not found.keys() <= {"on_error", "atomic"}:
        return None
    on_error = _ON_ERROR.get(found.get("on_error", "reject"))
    atomic = _ATOMIC.get(found.get("atomic", "false"))
    if on_error is None or atomic is None:
        return None
    return on_error, atomic
