"""Who may use the console: the access token on every request, and a CSRF token on every form.

The token is given once in the address (``/?token=…``, as Jupyter prints it); the console answers
with a cookie (HttpOnly, SameSite=Strict) and sends the browser to the same address without it,
so it is not left in the history or sent on as a referrer. Tokens are compared in constant time.
A request must name, in its ``Host`` header, an address the console listens on (a page on another
site cannot reach it through a DNS name rebound to 127.0.0.1), and a form is at most `MAX_FORM` bytes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any, Awaitable, Callable, Iterable
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from .inbox_page import POLL

COOKIE = "functai_console"

#: The most bytes a form may send (an edited input is at most a call's input limit, far below it).
MAX_FORM = 1 << 20


def _hash_of(script: str) -> str:
    """A ``<script>`` element's source as CSP names it by its hash."""
    source = script.removeprefix("<script>").removesuffix("</script>")
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


#: Sent with every page: no framing, no referrer to other sites, only this console's own inline style, and
#: of scripts only the inbox's poll, named by its hash (text that slipped past escaping cannot run as script).
HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "Content-Security-Policy": f"default-src 'none'; style-src 'unsafe-inline'; script-src {_hash_of(POLL)}; "
                               "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
}


def cookie_name(scope: dict[str, Any]) -> str:
    """The cookie of the console on this port: browsers share a host's cookies across its ports, so two
    consoles on one host would overwrite each other's (Jupyter names its cookie by port too)."""
    server = scope.get("server") or (None, None)
    return f"{COOKIE}_{server[1]}" if server[1] else COOKIE


def same(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def csrf_token(token: str) -> str:
    """The token every form carries: derived from the access token, so it changes with it."""
    return hmac.new(token.encode(), b"functai-console-csrf", hashlib.sha256).hexdigest()


class TokenGate:
    """ASGI middleware: refuse (403) a request for another host or without the token, and a form
    post without the CSRF token or from another origin; a form too large (413). ``hosts``: the
    names a request may give in ``Host`` (None: any, for a console listening on every address)."""

    def __init__(self, app: Any, token: str, hosts: Iterable[str] | None = None) -> None:
        self.app, self.token, self.csrf = app, token, csrf_token(token)
        self.hosts = None if hosts is None else frozenset(host.lower() for host in hosts)
        #: What the cookie holds: derived from the token, never the token itself (a cookie is sent to every
        #: port of the host, so another service there never sees the token).
        self.session = hmac.new(token.encode(), b"functai-console-session", hashlib.sha256).hexdigest()

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        if self.hosts is not None and _host(request.headers.get("host", "")) not in self.hosts:
            await _refuse("this console answers only at the address it listens on (the Host header names "
                          "another)")(scope, receive, send)
            return
        given = request.query_params.get("token")
        if given is not None:
            if not same(given, self.token):
                await _refuse("wrong token")(scope, receive, send)
                return
            rest = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
            path = "/" + request.url.path.lstrip("/\\")  # only a path on this console, never //another.site
            moved = RedirectResponse(path + (f"?{rest}" if rest else ""), status_code=303)
            moved.set_cookie(cookie_name(scope), self.session, httponly=True, samesite="strict", path="/")
            await moved(scope, receive, send)
            return
        if not same(request.cookies.get(cookie_name(scope)), self.session):
            await _refuse("this console needs its access token: open the address `functai console` printed "
                          "(…/?token=…)")(scope, receive, send)
            return
        if request.method not in ("GET", "HEAD"):
            origin = request.headers.get("origin")
            if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
                await _refuse("a form from another site")(scope, receive, send)
                return
            body = await _body(receive, MAX_FORM)
            if body is None:
                response = PlainTextResponse(f"413 too large: a form here is at most {MAX_FORM} bytes\n",
                                             status_code=413)
                response.headers.update(HEADERS)
                await response(scope, receive, send)
                return

            async def again() -> dict[str, Any]:
                return {"type": "http.request", "body": body, "more_body": False}

            try:
                form = await Request(scope, again).form()
            except Exception:  # noqa: BLE001 - a body no form can be read from, whatever the parser says
                await _refuse("the form cannot be read")(scope, receive, send)
                return
            if not same(str(form.get("csrf") or ""), self.csrf):
                await _refuse("the form's CSRF token is missing or wrong: reload the page")(scope, receive, send)
                return
            scope["functai.form"] = form  # the body is read once
        await self.app(scope, receive, _with_headers(send))


async def _body(receive: Callable[[], Awaitable[Any]], limit: int) -> bytes | None:
    """The request's body, or None once it passes ``limit`` bytes (the rest is not read)."""
    pieces, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        piece = message.get("body", b"")
        size += len(piece)
        if size > limit:
            return None
        pieces.append(piece)
        if not message.get("more_body"):
            break
    return b"".join(pieces)


def _host(header: str) -> str:
    """A ``Host`` header's name, without its port (an IPv6 address without its brackets)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rpartition(":")[0] if header.count(":") == 1 else header


def _refuse(why: str) -> Response:
    response = PlainTextResponse(f"403 forbidden: {why}\n", status_code=403)
    response.headers.update(HEADERS)
    return response


def _with_headers(send: Callable[[Any], Awaitable[None]]) -> Callable[[Any], Awaitable[None]]:
    async def sending(message: Any) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            headers += [(name.lower().encode(), value.encode()) for name, value in HEADERS.items()]
            message = {**message, "headers": headers}
        await send(message)

    return sending
