"""The web console at /console: server-rendered pages over the services the API routes use.

A person signs in with an API key, which starts a session: the browser's cookie holds the
session's random id, never the key (hub_api/console_sessions.py). Every form is checked against
forgery (its origin, and a token bound to the session) before it changes anything, and every
page and action is authorized by the same rules as the API: `require_owner` for connector
control, the owner's traces hidden from other teams as `GET /v1/connectors/{name}/status` hides
them. See docs/console.md, docs/adr/0036-web-console.md and docs/adr/0059-console-sessions.md.
"""

import logging
from typing import Annotated, Any, Literal, NamedTuple
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Depends, Query, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.concurrency import run_in_threadpool

from catalog.types import Principal
from hub_api.auth import authorize_connector, caller_of
from hub_api.console.lineage_page import LineageForm, trace, when
from hub_api.console.views import INTERVAL_S, INTERVALS, ConsoleViews
from hub_api.console_sessions import CONSOLE_PATH, SESSION_COOKIE, ConsoleSessions
from hub_api.deps import Control, Lineage, Registry
from hub_api.services import hub_services
from hub_api.settings import AuthMode
from hub_core.errors import HubError

log = logging.getLogger(__name__)

router = APIRouter(prefix=CONSOLE_PATH, include_in_schema=False)

# The console's sections, in the order of its navigation bar: a section is listed once its page
# exists, so the bar never links to nothing.
SECTIONS = (
    ("Feeds", f"{CONSOLE_PATH}/feeds"),
    ("Tables", f"{CONSOLE_PATH}/tables"),
    ("Connectors", f"{CONSOLE_PATH}/connectors"),
    ("Lineage", f"{CONSOLE_PATH}/lineage"),
)
Action = Literal["pause", "resume", "restart"]
ACTIONS: dict[Action, str] = {"pause": "Pause", "resume": "Resume", "restart": "Restart"}
_SIGN_IN = f"{CONSOLE_PATH}/sign-in"
_MAX_KEY_CHARS = 512

_templates = Environment(
    loader=PackageLoader("hub_api.console", "templates"),
    autoescape=select_autoescape(default=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


class SignInNeeded(Exception):
    """No valid key: the console answers with its sign-in page (`sign_in_redirect`)."""


def _signed_in(request: Request) -> Principal:
    principal = caller_of(request)
    if principal is None:
        raise SignInNeeded()
    request.state.console_caller = principal  # for `error_page`, should the page fail
    return principal


# The signed-in caller of a console page; without one the page redirects to sign-in.
SignedIn = Annotated[Principal, Depends(_signed_in)]


def _sessions(request: Request) -> ConsoleSessions:
    return hub_services(request.app).console_sessions


async def _fields(request: Request) -> dict[str, list[str]]:
    return parse_qs((await request.body()).decode("utf-8", errors="replace"))


class Posted(NamedTuple):
    """A console form that passed the checks against forgery, and who sent it."""

    caller: Principal
    fields: dict[str, list[str]]


async def _posted(request: Request) -> Posted:
    """Its own origin first (no lookup), then a signed-in caller (else the sign-in page), then
    the session's form token: a form failing any of them changes nothing."""
    sessions = _sessions(request)
    sessions.check_origin(request)
    caller = await run_in_threadpool(_signed_in, request)
    fields = await _fields(request)
    sessions.check_token(request, fields)
    return Posted(caller, fields)


# A console form, checked against forgery (hub_api/console_sessions.py), with its caller.
CheckedForm = Annotated[Posted, Depends(_posted)]


async def sign_in_redirect(request: Request, exc: Exception) -> Response:
    """The exception handler of `SignInNeeded`, installed on the app."""
    response = _to_sign_in()
    if SESSION_COOKIE in request.cookies:  # its session ended: the browser need not send it
        ConsoleSessions.forget(response)
    return response


async def console_views(request: Request) -> ConsoleViews:
    """The console's pages' contents, gathered over the app's services."""
    services = hub_services(request.app)
    return ConsoleViews(
        feeds=services.feeds,
        registry=services.registry,
        reader=services.reader,
        connectors=services.connectors,
        loader=services.loader,
    )


Views = Annotated[ConsoleViews, Depends(console_views)]


def _page(
    request: Request,
    template: str,
    *,
    caller: Principal | None,
    status_code: int = status.HTTP_200_OK,
    before_sign_in: bool = False,
    **context: Any,
) -> HTMLResponse:
    sessions = _sessions(request)
    # Forms are on the sign-in page and, for a caller, on every page (sign-out at least).
    token = (
        sessions.form_token(request, before_sign_in=before_sign_in)
        if caller is not None or before_sign_in
        else None
    )
    html = _templates.get_template(template).render(
        sections=SECTIONS,
        path=request.url.path,
        caller=caller,
        csrf_token=token.value if token else "",
        **context,
    )
    response = HTMLResponse(html, status_code=status_code)
    if token is not None:
        sessions.keep_form_cookie(response, token)
    response.headers["Cache-Control"] = "no-store"
    response.headers["Content-Security-Policy"] = (
        "default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


def error_page(request: Request, exc: HubError) -> HTMLResponse | None:
    """The console's answer to a page or action that failed with `exc`: its error page, with
    the code and message the API would give; None off the console's paths (JSON there).
    Installed on the app (`install_error_handlers(pages=...)`), so routes let errors rise."""
    path = request.url.path
    if path != CONSOLE_PATH and not path.startswith(f"{CONSOLE_PATH}/"):
        return None
    if exc.code.http_status >= 500:
        log.warning("console page %s failed: %s (%s)", path, exc.message, int(exc.code))
    return _page(
        request,
        "error.html",
        caller=getattr(request.state, "console_caller", None),
        status_code=int(exc.code) // 100,
        code=int(exc.code),
        message=exc.message,
    )


def _to_sign_in() -> RedirectResponse:
    return RedirectResponse(_SIGN_IN, status_code=status.HTTP_303_SEE_OTHER)


@router.get("")
def console_home(_caller: SignedIn) -> Response:
    """The feeds page when signed in, else the sign-in page."""
    return RedirectResponse(SECTIONS[0][1], status_code=status.HTTP_303_SEE_OTHER)


@router.get("/sign-in")
def sign_in_page(request: Request) -> HTMLResponse:
    return _page(request, "sign_in.html", caller=None, before_sign_in=True, problem=None)


@router.post("/sign-in")
async def sign_in(request: Request) -> Response:
    """Check the key as the API does, then start a session: the cookie gets the session's id,
    and the key is not kept anywhere."""
    sessions = _sessions(request)
    sessions.check_origin(request)
    fields = await _fields(request)
    sessions.check_token(request, fields, before_sign_in=True)
    services = hub_services(request.app)
    to_feeds = RedirectResponse(SECTIONS[0][1], status_code=status.HTTP_303_SEE_OTHER)
    if services.settings.auth is AuthMode.DISABLED:
        return to_feeds  # every caller is an admin: no key to stand for, so no session
    key = (fields.get("api_key") or [""])[0].strip()
    principal = (
        await run_in_threadpool(services.keys.verify, key)
        if key and len(key) <= _MAX_KEY_CHARS
        else None
    )
    if principal is None:
        return _page(
            request,
            "sign_in.html",
            caller=None,
            status_code=status.HTTP_401_UNAUTHORIZED,
            before_sign_in=True,
            problem="That key is not a valid API key of this hub. Ask your team for one, "
            "or create one with `hub key create --team TEAM`.",
        )
    await run_in_threadpool(sessions.start, to_feeds, principal)
    # The key's id and team, never the key or the session's id (the cookie's value).
    log.info("console sign-in with key %s (%s)", principal.key_id, _who(principal))
    return to_feeds


def _who(principal: Principal) -> str:
    return f"team {principal.team}" if principal.team else "admin"


@router.post("/sign-out")
async def sign_out(request: Request) -> Response:
    """End the session: its row is deleted, so a copy of its cookie signs nobody in after."""
    sessions = _sessions(request)
    sessions.check_origin(request)
    signed_in = await run_in_threadpool(sessions.current, request)
    if signed_in is not None:  # without a live session there is nothing to end but a cookie
        sessions.check_token(request, await _fields(request))
    response = _to_sign_in()
    await run_in_threadpool(sessions.end, request, response)
    if signed_in is not None:
        principal = signed_in.session.principal
        log.info("console sign-out of key %s (%s)", principal.key_id, _who(principal))
    return response


@router.get("/feeds")
def feeds_page(request: Request, views: Views, caller: SignedIn) -> Response:
    """Every feed with its owner, kind, partitions and records over the last hour."""
    rows = views.feed_rows()
    return _page(
        request,
        "feeds.html",
        caller=caller,
        rows=rows,
        loader_problem=views.loader_problem(),
        interval_minutes=INTERVAL_S // 60,
        hours=INTERVALS * INTERVAL_S / 3600,
    )


@router.get("/feeds/{topic}")
def feed_page(
    request: Request,
    topic: str,
    views: Views,
    caller: SignedIn,
    older: Annotated[int | None, Query()] = None,
    newer: Annotated[int | None, Query()] = None,
    replayed: Annotated[int | None, Query()] = None,
) -> Response:
    """One feed: schema versions and the diff of two, latest records, dead letters."""
    page = views.feed_page(topic, caller, older=older, newer=newer)
    return _page(request, "feed.html", caller=caller, page=page, quote=quote, replayed=replayed)


@router.post("/feeds/{topic}/replay")
def replay_feed(topic: str, views: Views, form: CheckedForm) -> Response:
    """Replay the feed's quarantine in the loader; its owner or an admin only, as the API's
    `POST /v1/feeds/{topic}/replay` (the server checks, whatever the page showed)."""
    result = views.replay(topic, form.caller)
    return RedirectResponse(
        f"{CONSOLE_PATH}/feeds/{quote(topic)}?replayed={result['landed']}#quarantine",
        status_code=status.HTTP_303_SEE_OTHER,
    )


@router.get("/tables")
def tables_page(request: Request, views: Views, caller: SignedIn) -> Response:
    """Bronze, silver and gold tables: rows, last commit and freshness, from the loader."""
    page = views.tables()
    return _page(request, "tables.html", caller=caller, page=page, plan=None, candidate="",
                 topic=None)  # fmt: skip


@router.post("/tables/plan")
async def plan_table(request: Request, views: Views, form: CheckedForm) -> Response:
    """The tables page with the plan of a candidate schema for a feed's bronze table."""
    topic = (form.fields.get("topic") or [""])[0]
    candidate = (form.fields.get("schema") or [""])[0].strip()
    page = await run_in_threadpool(views.tables)
    plan = await run_in_threadpool(views.plan, topic, candidate or None)
    return _page(request, "tables.html", caller=form.caller, page=page, plan=plan,
                 candidate=candidate, topic=topic)  # fmt: skip


@router.get("/lineage")
def lineage_page(
    request: Request, lineage: Lineage, registry: Registry, caller: SignedIn
) -> Response:
    """A row (a bronze row by partition and offset, a silver row by key) or a source position
    (an LSN, a publish request id, a topic's partition and offset) traced to every table
    version holding it, as `GET /v1/lineage/rows` and `/v1/lineage/positions` answer; their
    errors are shown on the page with their codes."""
    form = LineageForm.of(dict(request.query_params))
    answer, problem = None, None
    try:
        answer = trace(lineage, registry, caller, form)
    except HubError as exc:
        problem = exc
    return _page(
        request,
        "lineage.html",
        caller=caller,
        status_code=int(problem.code) // 100 if problem else status.HTTP_200_OK,
        form=form,
        answer=answer,
        problem=problem,
        when=when,
        quote=quote,
    )


@router.get("/connectors")
def connectors_page(
    request: Request, views: Views, caller: SignedIn, done: str | None = None
) -> Response:
    """Every connector: state, position, source figures, errors; controls for its owner."""
    connectors = views.connectors(caller)
    return _page(
        request,
        "connectors.html",
        caller=caller,
        connectors=connectors,
        actions=ACTIONS,
        done=done if done in ACTIONS else None,
    )


@router.post("/connectors/{name}/{action}")
def control_connector(name: str, action: Action, form: CheckedForm, control: Control) -> Response:
    """Pause, resume or restart a connector, with the rule the API's routes apply."""
    act = {"pause": control.pause, "resume": control.resume, "restart": control.restart}[action]
    authorize_connector(control, name, form.caller)
    act(name)
    return RedirectResponse(
        f"{CONSOLE_PATH}/connectors?done={action}#connector-{quote(name)}",
        status_code=status.HTTP_303_SEE_OTHER,
    )
