"""``functai store copy SRC DST`` (conversations) and ``functai calls copy SRC DST`` (a call log and its ratings)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from .._stores.urls import redact
from .common import CLIError, log_folder, plural, store_folder

WHERE = "a folder, a SQLite file or URL (sqlite:///…), a postgresql:// URL"


def register(commands: Any) -> None:
    store = commands.add_parser("store", help="move conversations between stores")
    verbs = store.add_subparsers(dest="verb", required=True, metavar="VERB")
    copy = verbs.add_parser(
        "copy", help="copy every conversation from one store to another, ids and records as they are",
        description=f"Copy conversations from SRC to DST ({WHERE}). Ids and records are kept as they are; "
        "running it again adds only what DST lacks, and a conversation that differs in DST is refused.",
    )
    copy.add_argument("source", metavar="SRC", help="the store to copy from")
    copy.add_argument("target", metavar="DST", help="the store to copy to")
    copy.add_argument("--conversation", action="append", metavar="ID", help="only this conversation (repeatable)")
    copy.set_defaults(run=cmd_store_copy)


def cmd_store_copy(args: argparse.Namespace, out: TextIO) -> int:
    from .._stores.copy import copy_conversations

    store_folder(args.source)  # refuses a source that is not there, rather than copying nothing
    added = copy_conversations(args.source, args.target, args.conversation)
    for name, count in added.items():
        print(f"{name}: {plural(count, 'record')} copied", file=out)
    print(f"copied {plural(len(added), 'conversation')} from {redact(args.source)} to {redact(args.target)}",
          file=out)
    return 0


def cmd_calls_copy(rest: list[str], out: TextIO) -> int:
    """``functai calls copy SRC DST`` (``calls`` keeps its optional FOLDER, so ``copy`` is read there)."""
    from .._stores.copy import copy_calls

    if len(rest) != 2:
        raise CLIError("functai calls copy takes SRC and DST", code="usage",
                       hint=f"functai calls copy SRC DST, each {WHERE} (a folder named copy: ./copy)")
    source, target = log_folder(rest[0]), log_folder(rest[1], existing=False)
    calls, ratings = copy_calls(source, target)
    print(f"copied {plural(calls, 'call')} and {plural(ratings, 'rating')} from {redact(source)} to "
          f"{redact(target)}", file=out)
    return 0
