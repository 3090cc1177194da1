"""Who may use the console: the access token on every request, and a CSRF token on every form.

The token is given once in the address (``/?token=…``, as Jupyter prints it); the console answers
with a cookie (HttpOnly, SameSite=Strict) and sends the browser to the same address without it,
so it is not left in the history or sent on as a referrer. Tokens are compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any, Awaitable, Callable
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

COOKIE = "functai_console"

#: Sent with every page: no framing, no referrer to other sites, only this console's own inline style and script.
HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
                               "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
}


def same(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def csrf_token(token: str) -> str:
    """The token every form carries: derived from the access token, so it changes with it."""
    return hmac.new(token.encode(), b"functai-console-csrf", hashlib.sha256).hexdigest()


class TokenGate:
    """ASGI middleware: refuse (403) a request without the token, and a form post without the
    CSRF token or from another origin."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.token, self.csrf = app, token, csrf_token(token)

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        given = request.query_params.get("token")
        if given is not None:
            if not same(given, self.token):
                await _refuse("wrong token")(scope, receive, send)
                return
            rest = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
            moved = RedirectResponse(request.url.path + (f"?{rest}" if rest else ""), status_code=303)
            moved.set_cookie(COOKIE, self.token, httponly=True, samesite="strict", path="/")
            await moved(scope, receive, send)
            return
        if not same(request.cookies.get(COOKIE), self.token):
            await _refuse("this console needs its access token: open the address `functai console` printed "
                          "(…/?token=…)")(scope, receive, send)
            return
        if request.method not in ("GET", "HEAD"):
            origin = request.headers.get("origin")
            if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
                await _refuse("a form from another site")(scope, receive, send)
                return
            form = await request.form()
            if not same(str(form.get("csrf") or ""), self.csrf):
                await _refuse("the form's CSRF token is missing or wrong: reload the page")(scope, receive, send)
                return
            scope["functai.form"] = form  # the body is read once
        await self.app(scope, receive, _with_headers(send))


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
