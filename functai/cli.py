"""The ``functai`` command (also ``python -m functai``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence, TextIO

from .calls.records import CallRecord, read_calls

DEFAULT_LOG = "calls"


def _log_folder(given: str | None) -> str:
    return given or os.environ.get("FUNCTAI_LOG_CALLS") or DEFAULT_LOG


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _status(record: CallRecord) -> str:
    return f"error:{record.error.get('code')}" if record.error else "ok"


def cmd_calls(args: argparse.Namespace, out: TextIO) -> int:
    records = list(read_calls(_log_folder(args.folder)))
    if not records:
        print(f"no calls recorded in {_log_folder(args.folder)}/", file=out)
        return 0
    for record in records[-args.limit :]:
        seconds = f"{record.seconds:.3f}s" if record.seconds is not None else "-"
        print(
            f"{record.started}  {record.id}  {record.path or record.function:<24} {record.model or '-':<20} "
            f"{seconds:>8}  {_status(record)}  changes={len(record.changes)} tools={len(record.tool_calls)}",
            file=out,
        )
    return 0


def cmd_show(args: argparse.Namespace, out: TextIO) -> int:
    folder = _log_folder(args.log)
    found = [r for r in read_calls(folder) if r.id.startswith(args.id)]
    if not found:
        print(f"no call with id {args.id!r} in {folder}/", file=sys.stderr)
        return 1
    if len({r.id for r in found}) > 1:
        print(f"{args.id!r} matches {len(found)} calls; give more of the id", file=sys.stderr)
        return 1
    print(json.dumps(found[-1].to_dict(), indent=2, ensure_ascii=False), file=out)
    return 0


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    from .demo import main as demo

    return demo(out)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="functai", description="Typed functions answered by a language model.")
    sub = top.add_subparsers(dest="command", required=True)

    calls = sub.add_parser("calls", help="recent call records, one line each")
    calls.add_argument("folder", nargs="?", help=f"the call log folder (default: $FUNCTAI_LOG_CALLS or {DEFAULT_LOG})")
    calls.add_argument("--limit", type=_positive, default=20, help="how many of the newest calls (default 20)")
    calls.set_defaults(run=cmd_calls)

    show = sub.add_parser("show", help="one call record in full")
    show.add_argument("id", help="the call id (a unique prefix is enough)")
    show.add_argument("--log", help=f"the call log folder (default: $FUNCTAI_LOG_CALLS or {DEFAULT_LOG})")
    show.set_defaults(run=cmd_show)

    demo = sub.add_parser("demo", help="run a small program (offline unless FUNCTAI_LM names a model)")
    demo.set_defaults(run=cmd_demo)
    return top


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.run(args, out or sys.stdout))
