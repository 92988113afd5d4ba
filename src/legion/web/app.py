"""The web view's requests: a thin layer over `WebReads` (what the CLI and TUI read and do),
the gate (who is logged in) and the checks of `legion.core.web_access`. No policy here.

Every response carries a strict Content-Security-Policy (scripts and styles from this server
only, no inline script, no framing, forms posting here only), no referrer and no caching.
A request naming a Host the server does not answer to is refused before anything else
(DNS rebinding); a write, and a live stream, must come from the server's own pages (Origin)
and a write must carry the session's CSRF token and come from an operator.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from importlib.resources import files
from urllib.parse import parse_qsl, urlencode

from starlette.applications import Starlette
from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import ClientDisconnect, Request
from starlette.responses import (
    HTMLResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from legion.core.model import normalize_identifier
from legion.core.text import for_display
from legion.core.web_access import (
    Role,
    csrf_matches,
    host_allowed,
    login_navigation,
    may_write,
    record_id,
    same_origin,
)
from legion.errors import InputError, LegionError
from legion.services.channels import parse_channel
from legion.web import pages
from legion.web.gate import COOKIE, Gate, LoginRefused, WebSession
from legion.web.live import END, LiveViews, TooManyListeners, View
from legion.web.reads import WebReads

SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "x-frame-options": "DENY",
    # No referrer leaves for another site. Not "no-referrer": under it a browser sends
    # `Origin: null` with a form's POST, and the Origin check could not tell our pages'.
    "referrer-policy": "same-origin",
    "x-content-type-options": "nosniff",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
    "cache-control": "no-store",
}
LOG = logging.getLogger("legion.web")
FORM_TYPE = "application/x-www-form-urlencoded"
FORM_LIMIT = 64 * 1024  # bytes: an answer is a few lines
# A live stream's comment line this often (seconds), so proxies and browsers keep it open.
KEEPALIVE_S = 15.0


@dataclass(frozen=True, slots=True)
class WebSettings:
    allowed_hosts: frozenset[str]
    scheme: str  # what the browser sees: "https" under TLS or behind a TLS proxy
    secure_cookie: bool

    @property
    def cookie(self) -> str:
        # Under TLS the `__Host-` prefix: a cookie only this origin's HTTPS pages can set.
        return f"__Host-{COOKIE}" if self.secure_cookie else COOKIE


class Guard:
    """Refuses a foreign Host; puts the security headers on every response."""

    def __init__(self, app: ASGIApp, settings: WebSettings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not host_allowed(Headers(scope=scope).get("host"), self.settings.allowed_hosts):
            response = PlainTextResponse("this server does not answer to that host name", 421)
            response.headers.update(SECURITY_HEADERS)
            await response(scope, receive, send)
            return

        started = False

        async def guarded(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                MutableHeaders(scope=message).update(SECURITY_HEADERS)
            await send(message)

        try:
            await self.app(scope, receive, guarded)
        except ClientDisconnect:
            return  # the page went: nobody to answer
        except Exception as exc:
            if started:
                raise
            # One line, never a traceback, to the person and to the server's log alike.
            LOG.warning(
                "%s %s failed: %s: %s", scope["method"], scope["path"], type(exc).__name__, exc
            )
            response = PlainTextResponse("the web view failed to answer that request", 500)
            response.headers.update(SECURITY_HEADERS)
            await response(scope, receive, send)


class WebView:
    """The requests' handlers, on the reads, the gate and the live views they share."""

    def __init__(self, reads: WebReads, gate: Gate, settings: WebSettings) -> None:
        self.reads = reads
        self.gate = gate
        self.settings = settings
        self.views = {
            "board": View(reads.boards, _board_part, reads.board_stamp),
            "inbox": View(reads.inbox, _inbox_part, reads.inbox_stamp),
            "spend": View(reads.spend, _spend_part, reads.spend_stamp),
            # A host's heartbeat's age moves each second: read each period.
            "hosts": View(reads.hosts, _hosts_part),
        }
        self.live = LiveViews(fixed=frozenset(self.views))

    # -- who asks ----------------------------------------------------------------------------

    def session_of(self, request: Request) -> WebSession | None:
        return self.gate.session(request.cookies.get(self.settings.cookie))

    def from_here(self, request: Request, *, write: bool) -> bool:
        headers = request.headers
        return same_origin(
            headers.get("origin"),
            headers.get("sec-fetch-site"),
            headers.get("host", ""),
            self.settings.scheme,
            write=write,
        )

    async def write_of(self, request: Request) -> tuple[WebSession, dict[str, str]] | Response:
        """The session of a write and its form's fields, or the response refusing it."""
        session = self.session_of(request)
        if session is None:
            return _not_logged_in()
        if not self.from_here(request, write=True):
            return _refused("not from this server's pages")
        fields = await _form(request)
        if fields is None:
            return PlainTextResponse("refused: a form of this server's is URL-encoded, short", 413)
        if not csrf_matches(session.csrf, fields.get("csrf")):
            return _refused("the form's CSRF token is missing or wrong")
        return session, fields

    # -- pages -------------------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        """GET: the printed link (`?token=`), or the form to paste a named token in; POST:
        that form."""
        address = request.client.host if request.client else "?"
        if request.method == "POST":
            if not self.from_here(request, write=True):
                return _refused("not from this server's pages")
            fields = await _form(request)
            if fields is None:
                return PlainTextResponse("refused: not a login form", 413)
            return self._logged_in(fields.get("token", ""), address, link_only=False)
        token = request.query_params.get("token")
        if token is None:
            return HTMLResponse(pages.login_form())
        # A page's part (an image, a fetch: another site's, or another local port's) neither
        # logs in nor counts as a failure: it could lock the owner out otherwise.
        headers = request.headers
        if not login_navigation(headers.get("sec-fetch-site"), headers.get("sec-fetch-dest")):
            return _refused("a login comes from an address typed or clicked, not a page's part")
        return self._logged_in(token, address, link_only=True)

    def _logged_in(self, token: str, address: str, *, link_only: bool) -> Response:
        try:
            cookie = self.gate.login(token, address, link_only=link_only)
        except LoginRefused as exc:
            return HTMLResponse(pages.message(str(exc)), 403)
        # The token leaves the address bar at once (no history, no referrer carries it).
        response = RedirectResponse("/", 303)
        response.set_cookie(
            self.settings.cookie,
            cookie,
            httponly=True,
            samesite="strict",
            secure=self.settings.secure_cookie,
            path="/",
        )
        return response

    async def _page(
        self,
        request: Request,
        name: str,
        title: str,
        part: Callable[[WebSession], str],
        stream: str = "",
    ) -> Response:
        session = self.session_of(request)
        if session is None:
            return _not_logged_in()
        html = pages.page(
            name,
            title,
            await asyncio.to_thread(part, session),
            who=session.name,
            role=session.role,
            csrf=session.csrf,
            flash=session.flash,
            stream=stream,
        )
        session.flash = ""
        return HTMLResponse(html)

    async def board(self, request: Request) -> Response:
        def part(session: WebSession) -> str:
            return pages.board_part(self.reads.boards(), session.role)

        return await self._page(request, "board", "Board", part)

    async def inbox(self, request: Request) -> Response:
        def part(session: WebSession) -> str:
            return pages.inbox_part(self.reads.inbox(), session.role, session.csrf)

        return await self._page(request, "inbox", "Inbox", part)

    async def issue(self, request: Request) -> Response:
        project, identifier = request.path_params["project"], request.path_params["issue"]

        def part(session: WebSession) -> str:
            return pages.issue_part(self.reads.issue(project, identifier), session.role)

        stream = "/events/issue?" + urlencode({"project": project, "issue": identifier})
        return await self._page(request, "issue", identifier, part, stream)

    async def spend(self, request: Request) -> Response:
        def part(session: WebSession) -> str:
            del session
            return pages.spend_part(self.reads.spend())

        return await self._page(request, "spend", "Spend", part)

    async def hosts(self, request: Request) -> Response:
        def part(session: WebSession) -> str:
            return pages.hosts_part(self.reads.hosts(), session.role, session.csrf)

        return await self._page(request, "hosts", "Hosts", part)

    async def channels(self, request: Request) -> Response:
        selected = parse_channel(request.query_params.get("c", ""))

        def part(session: WebSession) -> str:
            return pages.channels_part(self.reads.channels(selected), session.role, session.csrf)

        stream = "/events/channels?" + urlencode({"c": str(selected or "")})
        return await self._page(request, "channels", "Channels", part, stream)

    async def log(self, request: Request) -> Response:
        issue = _issue_filter(request)
        if issue is None:
            return PlainTextResponse("refused: not an issue identifier (LEG-7)", 400)

        def part(session: WebSession) -> str:
            del session
            return pages.log_part(self.reads.logs(issue or None), issue)

        stream = "/events/log?" + urlencode({"issue": issue})
        return await self._page(request, "log", "Log", part, stream)

    def view_of(self, request: Request) -> tuple[str, View] | None:
        """The live view a stream asks for: its name and how it is read; None: no such view."""
        name = request.path_params["view"]
        if name in self.views:
            return name, self.views[name]
        reads = self.reads
        if name == "log":
            issue = _issue_filter(request)
            if issue is None:
                return None
            return f"log/{issue}", View(
                lambda: pages.log_part(reads.logs(issue or None), issue),
                _as_rendered,
                reads.log_stamp,
            )
        if name == "channels":
            selected = parse_channel(request.query_params.get("c", ""))
            if selected is not None and not reads.has_channel(selected):
                return None  # a view only of a channel there is: each is read while listened to
            return f"channels/{selected or ''}", View(
                lambda: reads.channels(selected), _channels_part, reads.bus_stamp
            )
        if name != "issue":
            return None
        project = request.query_params.get("project", "")
        try:
            identifier = normalize_identifier(request.query_params.get("issue", ""))
        except InputError:
            return None
        if not self.reads.has_project(project):
            return None  # one view per project and issue that exist: no reads for made-up ones
        return f"issue/{project}/{identifier}", View(
            lambda: reads.issue(project, identifier), _issue_part
        )

    async def events(self, request: Request) -> Response:
        """A view's live part, pushed (server-sent events) each time it changes."""
        session = self.session_of(request)
        if session is None:
            return PlainTextResponse("not logged in", 401)
        if not self.from_here(request, write=False):
            return _refused("not from this server's pages")
        found = await asyncio.to_thread(self.view_of, request)
        if found is None:
            return PlainTextResponse("no such view", 404)
        name, view = found
        event = request.path_params["view"]
        cookie = request.cookies.get(self.settings.cookie) or ""
        busy = self.live.refusal(name, session.owner)
        if busy is not None:
            return PlainTextResponse(f"busy: {busy}", 503)

        async def stream() -> AsyncIterator[str]:
            try:
                with self.live.listener(name, view, session.role, session.owner) as changes:
                    while True:
                        try:
                            html = await asyncio.wait_for(changes.get(), KEEPALIVE_S)
                        except TimeoutError:
                            html = None
                        if self.gate.session(cookie) is None:
                            return  # logged out, expired, or its token revoked: no more
                        if html is None:
                            yield ": keep-alive\n\n"
                            continue
                        if html == END:
                            return  # the server stops
                        lines = "".join(f"data: {line}\n" for line in html.splitlines())
                        yield f"event: {event}\nid: {pages.version(html)}\n{lines}\n"
            except TooManyListeners:
                return  # filled up since it was admitted: the page tries again later

        # Behind a proxy (nginx), a stream is passed on as it comes, not buffered.
        headers = {"x-accel-buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    # -- writes ------------------------------------------------------------------------------

    async def operator_write(
        self,
        request: Request,
        what: str,
        act: Callable[[WebSession, dict[str, str]], str],
        back: Callable[[dict[str, str]], str],
    ) -> Response:
        """A person's write: checked (`write_of`), an operator's only (`what` the viewer is
        refused), done by `act` off the event loop (a refusal is its flash), then back to
        the page `back` names."""
        checked = await self.write_of(request)
        if isinstance(checked, Response):
            return checked
        session, fields = checked
        if not may_write(session.role):
            return _refused(f"a viewer cannot {what} (an operator's token can)")
        try:
            said = await asyncio.to_thread(act, session, fields)
        except LegionError as exc:
            said = f"not done: {exc}"
        session.flash = for_display(said)
        return RedirectResponse(back(fields), 303)

    async def answer(self, request: Request) -> Response:
        def act(session: WebSession, fields: dict[str, str]) -> str:
            project, issue = fields.get("project", ""), fields.get("issue", "")
            return self.reads.answer(project, issue, fields.get("text", ""), session.name)

        return await self.operator_write(request, "answer", act, lambda _: "/inbox")

    async def reply(self, request: Request) -> Response:
        def act(session: WebSession, fields: dict[str, str]) -> str:
            question, text = fields.get("question", ""), fields.get("text", "")
            return self.reads.reply(question, text, session.name)

        return await self.operator_write(request, "answer", act, lambda _: "/inbox")

    async def say(self, request: Request) -> Response:
        def act(session: WebSession, fields: dict[str, str]) -> str:
            channel = parse_channel(fields.get("c", ""))
            if channel is None:
                raise InputError("no channel named")
            return self.reads.say(channel, fields.get("text", ""), session.name)

        return await self.operator_write(request, "post", act, _back_to_channel)

    async def agent(self, request: Request) -> Response:
        def act(session: WebSession, fields: dict[str, str]) -> str:
            agent_id = record_id(fields.get("agent", ""))
            if agent_id is None:
                raise InputError("no agent named")
            return self.reads.agent_action(agent_id, fields.get("do", ""), session.name)

        return await self.operator_write(request, "archive or kill", act, _back_to_channel)

    async def drain(self, request: Request) -> Response:
        def act(session: WebSession, fields: dict[str, str]) -> str:
            project, host = fields.get("project", ""), fields.get("host", "")
            undo = fields.get("undo") == "1"
            return self.reads.drain(project, host, undo=undo, author=session.name)

        return await self.operator_write(request, "drain a host", act, lambda _: "/hosts")

    async def logout(self, request: Request) -> Response:
        checked = await self.write_of(request)
        if isinstance(checked, Response):
            return checked
        self.gate.logout(request.cookies.get(self.settings.cookie))
        response = HTMLResponse(pages.message("Logged out."))
        response.delete_cookie(self.settings.cookie, path="/", secure=self.settings.secure_cookie)
        return response

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        del app
        try:
            yield
        finally:
            self.live.close()


def _board_part(data: object, role: Role) -> str:
    return pages.board_part(data, role)  # type: ignore[arg-type]  # `WebReads.boards`' list


def _as_rendered(data: object, role: Role) -> str:
    del role  # read as its page (`View.read` renders it)
    assert isinstance(data, str)
    return data


def _issue_filter(request: Request) -> str | None:
    """The `issue` a page is filtered to, normalized ("" for none); None: not an identifier."""
    given = request.query_params.get("issue", "").strip()
    if not given:
        return ""
    try:
        return normalize_identifier(given)
    except InputError:
        return None


def _channels_part(data: object, role: Role) -> str:
    return pages.channels_part(data, role)  # type: ignore[arg-type]  # `WebReads.channels`'


def _back_to_channel(fields: dict[str, str]) -> str:
    return "/channels?" + urlencode({"c": fields.get("c", "")})


def _spend_part(data: object, role: Role) -> str:
    del role  # every person sees the same spend
    return pages.spend_part(data)  # type: ignore[arg-type]  # `WebReads.spend`'s


def _hosts_part(data: object, role: Role) -> str:
    return pages.hosts_part(data, role)  # type: ignore[arg-type]  # `WebReads.hosts`'


def _issue_part(data: object, role: Role) -> str:
    return pages.issue_part(data, role)  # type: ignore[arg-type]  # `WebReads.issue`'s


def _inbox_part(data: object, role: Role) -> str:
    return pages.inbox_part(data, role)  # type: ignore[arg-type]  # `WebReads.inbox`'s


async def _form(request: Request) -> dict[str, str] | None:
    """A form's fields (the last of each name); None for a body no page of ours sends."""
    if request.headers.get("content-type", "").split(";")[0].strip() != FORM_TYPE:
        return None
    body = b""
    async for chunk in request.stream():  # ClientDisconnect: the page went (`Guard`)
        body += chunk
        if len(body) > FORM_LIMIT:
            return None
    return dict(parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True))


def _not_logged_in() -> Response:
    text = (
        "You are not logged in: open the link `legion web` printed, or one with a token "
        "`legion web token --name YOU` made for you."
    )
    return HTMLResponse(pages.message(text), 401)


def _refused(why: str) -> Response:
    return PlainTextResponse(f"refused: {why}", 403)


def create_app(reads: WebReads, gate: Gate, settings: WebSettings) -> Starlette:
    view = WebView(reads, gate, settings)
    static = StaticFiles(directory=str(files("legion.web") / "static"))
    app = Starlette(
        routes=[
            Route("/", view.board),
            Route("/inbox", view.inbox),
            Route("/issue/{project}/{issue}", view.issue),
            Route("/log", view.log),
            Route("/channels", view.channels),
            Route("/channels/say", view.say, methods=["POST"]),
            Route("/channels/agent", view.agent, methods=["POST"]),
            Route("/spend", view.spend),
            Route("/hosts", view.hosts),
            Route("/hosts/drain", view.drain, methods=["POST"]),
            Route("/login", view.login, methods=["GET", "POST"]),
            Route("/logout", view.logout, methods=["POST"]),
            Route("/inbox/answer", view.answer, methods=["POST"]),
            Route("/inbox/reply", view.reply, methods=["POST"]),
            Route("/events/{view}", view.events),
            Mount("/static", static, name="static"),
        ],
        lifespan=view.lifespan,
    )
    app.add_middleware(Guard, settings=settings)
    app.state.live = view.live  # its streams are ended when the server stops (`web.serve`)
    return app
