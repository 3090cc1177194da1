"""``functai console``, added to the ``functai`` command through the ``functai.commands`` entry point.

This module is imported by every ``functai`` command, so it imports nothing heavy: Starlette and
uvicorn are imported when the console runs.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import threading
from typing import Any, TextIO

#: The addresses only this machine can reach: the console binds one unless told otherwise.
LOCAL = ("127.0.0.1", "localhost", "::1")


def register(commands: Any) -> None:
    console = commands.add_parser(
        "console", help="the approvals inbox, the call browser and the conversation tree, in a browser",
        description="Serve a console for a store (and its call log) on 127.0.0.1, behind an access token.")
    console.add_argument("store", help="the store: a folder or a sqlite:/postgresql: URL")
    console.add_argument("--log", metavar="CALLS", help="the call log: a folder or a store URL (default: none)")
    console.add_argument("--host", default="127.0.0.1",
                         help="the address to listen on (default 127.0.0.1; another needs --token)")
    console.add_argument("--port", type=int, default=0, help="the port (default 0: a free one)")
    console.add_argument("--token", help="the access token (default: $FUNCTAI_CONSOLE_TOKEN, which other users "
                                         "cannot read in the process list, else a random one, printed at start)")
    console.add_argument("--import", dest="imports", metavar="MODULE", action="append", default=[],
                         help="import this module, so the console can resume the turns of its functions "
                              "(repeatable)")
    console.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    import functai
    from functai.cli import CLIError

    args.token = args.token or os.environ.get("FUNCTAI_CONSOLE_TOKEN") or None
    if args.host not in LOCAL and not args.token:
        raise CLIError(f"--host {args.host} lets other machines reach the console: give an access token with "
                       "--token (or FUNCTAI_CONSOLE_TOKEN)", code="console-token",
                       hint="choose a long random token and share it as a secret")
    if args.token is not None and len(args.token) < 16:
        raise CLIError("--token must be at least 16 characters", code="console-token")
    _exists(args.store, "store")  # a call log may not be there yet: it is made when a program's first call ends
    import socket

    import uvicorn

    from .app import Console, make_app

    console = Console(args.store, log=args.log, imports=args.imports)
    try:  # a store that cannot be read (not a database, a server that refuses) is said now, not on every page
        console.conversations()
    except functai.FunctAIError as error:
        raise CLIError(error.message, code=error.code, status=1) from None
    token = args.token or secrets.token_urlsafe(24)
    app = make_app(console, token, hosts=_hosts(args.host))
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((args.host, args.port))
    except OSError as error:
        raise CLIError(f"cannot listen on {args.host}:{args.port}: {error.strerror}", code="console-address",
                       status=1) from None
    listener.listen(128)  # before the address is printed: a browser opening it at once waits, is never refused
    port = listener.getsockname()[1]
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"functai console for {console.where}" + (f" and the call log {console.log_where}" if args.log else ""),
          file=out)
    print(f"open: http://{host}:{port}/?token={token}", file=out)
    out.flush()
    threading.Thread(target=console.warm, name="functai-console-warm", daemon=True).start()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[listener])
    return 0


def _hosts(host: str) -> tuple[str, ...] | None:
    """The names a request may give in ``Host``: this machine's, and the address listened on; any
    for a console that listens on every address (it has a token then)."""
    if host in ("0.0.0.0", "::", ""):
        return None
    return (*LOCAL, host.strip("[]").lower())


def _exists(where: str, what: str) -> None:
    """Refuse a folder or SQLite file that is not there: the console must not make an empty one
    (a typo would look like a store with nothing in it). Other URLs are checked when read."""
    from functai.cli import CLIError

    path = where[len("sqlite:///"):] if where.startswith("sqlite:///") else None
    if path is None and "://" not in where and not where.endswith((".db", ".sqlite", ".sqlite3")):
        if not os.path.isdir(where):
            raise CLIError(f"no {what} folder {where}", code="not-found",
                           hint="give the folder or URL the program keeps it in")
    elif path is not None or "://" not in where:
        if not os.path.isfile(path or where):
            raise CLIError(f"no SQLite {what} {path or where}", code="not-found")


if __name__ == "__main__":  # python -m functai_console.command STORE ...: the same as `functai console`
    from functai.cli import main

    sys.exit(main(["console", *sys.argv[1:]]))
