"""``functai calls`` (recent call records) and ``functai show ID`` (one record, read by a person)."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from .._calls.reading import find_calls, read_calls
from .._calls.records import CallRecord, not_kept
from .._stores.callquery import CallQuery
from .common import LOG_HELP, CLIError, location, log_folder, plural, positive, table
from .stores import cmd_calls_copy


def register(commands: Any) -> None:
    # its own -h: `functai calls copy --help` shows the copy's help, not this one's
    calls = commands.add_parser("calls", help="recent call records, one line each", add_help=False)
    calls.add_argument("-h", "--help", action="store_true", help="show this help message and exit")
    calls.add_argument("folder", nargs="?", help=LOG_HELP + "; `functai calls copy SRC DST` copies a call log")
    calls.add_argument("more", nargs="*", help=argparse.SUPPRESS)  # SRC DST of `calls copy`
    calls.add_argument("--limit", type=positive, default=20, help="how many of the newest calls (default 20)")
    calls.set_defaults(run=cmd_calls, parser=calls)

    show = commands.add_parser("show", help="one call record, readable (or --json)")
    show.add_argument("id", help="the call id (a unique prefix is enough)")
    show.add_argument("--log", help=LOG_HELP)
    show.add_argument("--json", action="store_true", help="print the raw record as JSON")
    show.add_argument("--timing", action="store_true",
                      help="the call's plugin handlers, slowest first (recorded with record_timing=True)")
    show.set_defaults(run=cmd_show)


def cmd_calls(args: argparse.Namespace, out: TextIO) -> int:
    if args.help:
        (COPY if args.folder == "copy" else args.parser).print_help(out)
        return 0
    if args.folder == "copy":
        return cmd_calls_copy(args.more, out)
    if args.more:
        raise CLIError(f"functai calls takes one call log, not {1 + len(args.more)}", code="usage",
                       hint="functai calls [FOLDER], or functai calls copy SRC DST")
    folder = log_folder(args.folder)
    skipped: list[tuple[str, str]] = []
    records = list(read_calls(folder, newest=args.limit, skipped=skipped))  # newest first
    for where, reason in skipped:  # said once each, rather than as Python warnings
        print(f"functai: skipped {where}: {reason}", file=args.err)
    if not records:
        print(f"no calls recorded in {location(folder)}", file=out)
        return 0
    rows = [["STARTED", "ID", "FUNCTION", "MODEL", "SECONDS", "STATUS", "CHANGES", "TOOLS"]]
    for record in reversed(records):
        rows.append([
            record.started, record.id, record.path or record.function, record.model or "-",
            f"{record.seconds:.3f}" if record.seconds is not None else "-",
            f"error:{record.error.get('code')}" if record.error else "ok",
            str(len(record.changes)), str(len(record.tool_calls)),
        ])
    table(rows, out)
    return 0


COPY = argparse.ArgumentParser(
    prog="functai calls copy", description="Copy a call log's records and ratings into another call log: a "
    "folder, a sqlite:/// or a postgresql:// URL (what the target holds already is kept).")
COPY.add_argument("source", metavar="SRC", help="the call log to copy from")
COPY.add_argument("target", metavar="DST", help="the call log to copy into (made when missing)")


def find(folder: str, prefix: str, err: TextIO) -> CallRecord:
    """The one logged call whose id starts with ``prefix`` (not empty: it starts every id); the log's
    damaged lines it met said once each on ``err``, as `functai calls` says them."""
    if not prefix.strip():
        raise CLIError("the call id is empty", code="call-id",
                       hint=f"give a call id, or enough of its start to be unique: `functai calls {location(folder)}` "
                            "lists the recent ones")
    skipped: list[tuple[str, str]] = []
    try:
        found = (find_calls(folder, CallQuery(id=prefix, newest=1), skipped)  # a whole id, even one starting another
                 or find_calls(folder, CallQuery(id=prefix, prefix=True, newest=2), skipped))  # a second: not unique
    finally:
        for where, reason in dict.fromkeys(skipped):  # both reads met them: said once
            print(f"functai: skipped {where}: {reason}", file=err)
    if not found:
        raise CLIError(f"no call with id {prefix!r} in {location(folder)}", code="not-found",
                       hint=f"`functai calls {location(folder)}` lists the recent ones")
    if len(found) > 1:
        raise CLIError(f"{prefix!r} matches more than one call ({found[0].id}, {found[1].id}, ...)",
                       code="ambiguous-id", hint="give more of the id")
    return found[0]


def cmd_show(args: argparse.Namespace, out: TextIO) -> int:
    record = find(log_folder(args.log), args.id, args.err)
    if args.timing:
        render_timing(record, out)
    elif args.json:
        print(json.dumps(record.to_dict(), indent=2, ensure_ascii=False), file=out)
    else:
        render(record, out)
    return 0


def render_timing(record: CallRecord, out: TextIO, limit: int = 20) -> None:
    """The handlers a call ran, slowest first, from ``µs`` in its changes and ``heard``."""
    timed = [entry for entry in [*record.changes, *record.heard] if "µs" in entry]
    if not timed:
        raise CLIError(f"call {record.id} has no handler timing", code="no-timing",
                       hint="it is recorded only for calls made with record_timing=True "
                            "(functai.configure(record_timing=True), or any settings layer)")
    timed.sort(key=lambda entry: -float(entry["µs"]))
    total = sum(float(entry["µs"]) for entry in timed)
    print(f"call {record.id} ({record.path or record.function}): {plural(len(timed), 'handler run')}, "
          f"{total:,.1f} µs in handlers of {(record.seconds or 0) * 1e6:,.1f} µs", file=out)
    rows = [["µs", "PLUGIN", "VERSION", "HOOK", "WHAT"]]
    for entry in timed[:limit]:
        what = "heard" if entry in record.heard else ("changed" if "change" in entry else "changed (content not kept)")
        rows.append([f"{float(entry['µs']):,.1f}", str(entry["plugin"]), str(entry.get("version", "")),
                     str(entry["hook"]), what])
    table(rows, out)
    if len(timed) > limit:
        print(f"(and {len(timed) - limit} more)", file=out)


def _text(value: Any) -> str:
    if not_kept(value):
        return f"({value['chars']} characters, not kept: log_content=False)"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _block(title: str, text: str, out: TextIO) -> None:
    print(f"{title}:", file=out)
    for line in text.splitlines() or [""]:
        print(f"  {line}", file=out)


def render(record: CallRecord, out: TextIO) -> None:
    """The record as a person reads it: what was asked, what shaped it, what came back."""
    fields = [
        ("call", record.id + (f" (inside {record.parent})" if record.parent else "")),
        ("function", f"{record.module}:{record.function}" if record.module else record.function),
        ("version", record.version),
        ("path", record.path or record.function),
        ("model", record.model or "-"),
        ("started", record.started),
        ("timing", (f"{record.seconds:.3f}s" if record.seconds is not None else "-")
         + f", {plural(record.attempts, 'model request')}"),
    ]
    optional = [
        ("usage", ", ".join(f"{k} {v}" for k, v in (record.usage or {}).items())),
        ("settings", ", ".join(f"{k}={_text(v)}" for k, v in (record.settings or {}).items())),
        ("conversation", ", ".join(f"{k} {_text(v)}" for k, v in (record.conversation or {}).items() if v)),
        ("replayable", "" if record.replayable else "no (a plugin replaced the request)"),
        ("rating", ("good" if record.rating.get("good") else "bad") if record.rating else ""),
    ]
    fields += [(name, value) for name, value in optional if value]
    width = max(len(name) for name, _ in fields) + 1
    for name, value in fields:
        print(f"{name + ':':<{width}} {value}", file=out)
    print("inputs:", file=out)
    for name, value in record.inputs.items():
        print(f"  {name} = {_text(value)}", file=out)
    if record.instruction is not None:
        _block("instruction", _text(record.instruction), out)
    if record.sections:
        print("sections:", file=out)
        for section in record.sections:
            print("  - " + "\n    ".join(_text(section).splitlines() or [""]), file=out)
    if record.changes:
        print("changes, by plugin:", file=out)
        by_plugin: dict[str, list[dict[str, Any]]] = {}
        for change in record.changes:
            by_plugin.setdefault(f"{change['plugin']} {change.get('version', '')}".strip(), []).append(change)
        for plugin, changes in by_plugin.items():
            print(f"  {plugin}", file=out)
            for change in changes:
                what = _text(change["change"]) if "change" in change else "(content not kept)"
                note = f"  ({change['note']})" if "note" in change else ""
                by = f" by {change['by']}" if change.get("by") else ""  # a person's edit on approving
                print(f"    {change['hook']}{by}: {what}{note}", file=out)
    if record.tool_calls:
        print("tool calls:", file=out)
        for call in record.tool_calls:
            print(f"  {call['name']}({_text(call.get('input'))})", file=out)
            stopped = next((how for how in ("blocked", "refused") if how in call), None)
            if stopped:
                why = call.get("block_reason" if stopped == "blocked" else "refuse_reason")
                print(f"    {stopped} by {call[stopped]}" + (f": {_text(why)}" if why else ""), file=out)
            elif "error" in call:
                print(f"    failed: {_text(call['error'])}", file=out)
            else:
                settled = "  (settled by its reconcile after a crash)" if call.get("reconciled") else ""
                print(f"    -> {_text(call.get('output'))}{settled}", file=out)
    if record.error:
        print(f"error: [{record.error.get('code')}] {_text(record.error.get('message', ''))}", file=out)
    else:
        _block("value", _text(record.output), out)
