"""The console's routes (Starlette): the inbox, the call browser and the conversation tree.

Every page is rendered on the server; the only script polls the inbox's rows. Every request
passes `TokenGate` first. Endpoints are plain functions: Starlette runs them in a thread, so a
slow store never blocks the server's loop.
"""

from __future__ import annotations

import secrets
import threading
from typing import Any, Iterable
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

import functai

from . import calls_page, inbox, inbox_page, tree_page
from .html import e, page
from .security import TokenGate, csrf_token
from .state import Console

__all__ = ["Console", "make_app"]


class Notes:
    """What the last action did, shown once on the page it leads to (a POST answers with a redirect)."""

    def __init__(self) -> None:
        self._notes: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

    def add(self, note: str = "", error: str = "") -> str:
        key = secrets.token_urlsafe(8)
        with self._lock:
            if len(self._notes) > 1000:
                self._notes.clear()
            self._notes[key] = (note, error)
        return key

    def take(self, key: str | None) -> tuple[str, str]:
        with self._lock:
            return self._notes.pop(key or "", ("", ""))


def make_app(console: Console, token: str, hosts: Iterable[str] | None = None) -> Any:
    """The console as an ASGI app, behind ``token``, answering requests for ``hosts`` (None: any)."""
    csrf = csrf_token(token)
    notes = Notes()

    def show(request: Request, title: str, body: str, script: str = "", status: int = 200) -> HTMLResponse:
        note, error = notes.take(request.query_params.get("note"))
        return HTMLResponse(page(title, body, where=console.where, note=note, error=error, script=script),
                            status_code=status)

    def home(request: Request) -> Response:
        items = inbox.waiting(console)
        return show(request, "Inbox", inbox_page.body(items, csrf), inbox_page.POLL)

    def inbox_rows(request: Request) -> Response:
        return HTMLResponse(inbox_page.row_html(inbox.waiting(console), csrf))

    def answer(request: Request) -> Response:
        form = request.scope["functai.form"]
        try:
            done = inbox.answer(console, form)
        except functai.FunctAIError as error:
            return RedirectResponse(f"/?note={notes.add(error=_failure(error))}", status_code=303)
        return RedirectResponse(f"/?note={notes.add(note=done)}", status_code=303)

    def calls(request: Request) -> Response:
        if not console.log:
            return show(request, "Calls", "<p>No call log: start the console with <code>--log CALLS</code>.</p>")
        params = dict(request.query_params)
        try:
            found, more = console.calls(calls_page.read_filters(params), before=params.get("before") or None,
                                        page=calls_page.PAGE)
        except functai.FunctAIError as error:  # a filter the log cannot be read by (a day not written YYYY-MM-DD)
            wrong = f'<p class="bad">{e(_failure(error))}</p>'
            return show(request, "Calls", wrong + calls_page.table([], params, False), status=400)
        return show(request, "Calls", calls_page.table(found, params, more))

    def one_call(request: Request) -> Response:
        call_id = request.path_params["call"]
        found = console.call(call_id)
        if found is None:
            return show(request, "No such call", f"<p>The call log has no call {e(call_id)}.</p>", status=404)
        return show(request, f"Call {found.function}", calls_page.call(found, list(console.nested(call_id)), csrf))

    def rate(request: Request) -> Response:
        call_id = request.path_params["call"]
        form = request.scope["functai.form"]
        back = f"/calls/{quote(call_id)}"
        by = str(form.get("by") or "").strip()
        try:
            if not by:
                raise functai.FunctAIError("give your name: a rating is kept with who gave it", code="console-by")
            console.rate(call_id, good=form.get("good") == "1", correction=str(form.get("correction") or "") or None,
                         by=by)
        except functai.FunctAIError as error:
            return RedirectResponse(f"{back}?note={notes.add(error=_failure(error))}", status_code=303)
        verdict = "good" if form.get("good") == "1" else "bad"
        return RedirectResponse(f"{back}?note={notes.add(note=f'rated {verdict} by {by}')}", status_code=303)

    def conversations(request: Request) -> Response:
        items: list[tuple[str, str | None, Any, Any]] = []
        for cid, view, why in console.readable():
            if view is None:
                items.append((cid, f"unreadable: {why}", "-", 0))
            else:
                turns = view.all_turns()
                items.append((cid, view.function, len(turns), sum(t.state == "waiting" for t in turns)))
        return show(request, "Conversations", tree_page.listing(items))

    def conversation(request: Request) -> Response:
        cid = request.path_params["conversation"]
        if cid not in console.conversations():
            return show(request, "No such conversation", f"<p>The store has no conversation {e(cid)}.</p>",
                        status=404)
        view, why = console.read(cid)
        if view is None:
            return show(request, "Unreadable conversation",
                        f"<p>The conversation {e(cid)} cannot be read: {e(why)}</p>", status=422)
        body = f"<p>function {e(view.function or '-')}</p>" + tree_page.tree(
            view.all_turns(), view.all_entries(), bool(console.log))
        return show(request, f"Conversation {cid}", body)

    routes = [
        Route("/", home),
        Route("/inbox/rows", inbox_rows),
        Route("/inbox/answer", answer, methods=["POST"]),
        Route("/calls", calls),
        Route("/calls/{call}", one_call),
        Route("/calls/{call}/rate", rate, methods=["POST"]),
        Route("/conversations", conversations),
        Route("/conversations/{conversation}", conversation),
    ]
    async def unreadable(request: Request, error: Exception) -> Response:
        """A store or log that cannot be read now (a damaged file, a server gone): said on the page."""
        assert isinstance(error, functai.FunctAIError)
        return show(request, "Cannot read", f'<p class="bad">{e(_failure(error))}</p>', status=503)

    return TokenGate(Starlette(routes=routes, exception_handlers={functai.FunctAIError: unreadable}), token, hosts)


def _failure(error: functai.FunctAIError) -> str:
    """An error as the page shows it: its code and message (``approval-answered`` names who answered first)."""
    return f"[{error.code}] {error.message}"
