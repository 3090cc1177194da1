"""The ``functai`` command (also ``python -m functai``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Sequence, TextIO

from .calls.records import CallRecord, read_calls

if TYPE_CHECKING:
    from .conversations.history import History
    from .hooks.installed import Installed

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


def _short(value: object, width: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _history(store_arg: str, conversation: str) -> "History | None":
    from .conversations.history import History
    from .conversations.store import open_store

    history = History()
    history.apply_all(open_store(store_arg).read(conversation))
    return history if history.count else None


def cmd_conversation(args: argparse.Namespace, out: TextIO) -> int:
    history = _history(args.store, args.id)
    if history is None:
        print(f"no conversation {args.id!r} in {args.store}", file=sys.stderr)
        return 1
    header = history.header or {}
    print(f"conversation {args.id} ({header.get('function', '?')}, {len(history.order)} turns)", file=out)

    def show(turn_id: str, prefix: str, last: bool) -> None:
        turn = history.turns[turn_id]
        branch = "└─ " if last else "├─ "
        what = _short({k: v for k, v in turn.inputs.items()})
        if turn.state == "done":
            what += f"  → {_short(turn.outputs.get('output', turn.outputs))}"
        elif turn.state == "waiting":
            asks = ", ".join(f"{a['name']} {_short(a['input'], 40)} ({a['plugin']})" for a in turn.approvals)
            what += f"  waits for: {asks}"
        elif turn.error:
            what += f"  ({turn.error.get('code')})"
        print(f"{prefix}{branch}{turn_id} {turn.state:<8} {what}", file=out)
        children = history.children.get(turn_id, [])
        for i, child in enumerate(children):
            show(child, prefix + ("   " if last else "│  "), i == len(children) - 1)

    roots = history.children.get(None, [])
    for i, root in enumerate(roots):
        show(root, "", i == len(roots) - 1)
    if history.entries:
        print("entries:", file=out)
        for entry in history.entries:
            where = f"@{entry['turn']}" if entry["turn"] else "(every branch)"
            print(f"  {entry['plugin']}/{entry['kind']} {where}: {_short(entry['data'])}", file=out)
    return 0


def _import_program(reference: str) -> object:
    import importlib

    module_name, _, qualname = reference.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    target: object = importlib.import_module(module_name)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


def cmd_approve(args: argparse.Namespace, out: TextIO) -> int:
    from .errors import FunctAIError, Waiting

    history = _history(args.store, args.id)
    if history is None:
        print(f"no conversation {args.id!r} in {args.store}", file=sys.stderr)
        return 1
    reference = (history.header or {}).get("function")
    if not reference:
        print(f"conversation {args.id!r} does not record its function", file=sys.stderr)
        return 1
    try:
        program = _import_program(reference)
    except (ImportError, AttributeError) as error:
        print(f"cannot import {reference} (the conversation's function): {error}; run this where it is importable",
              file=sys.stderr)
        return 1
    chat = program.conversation(args.id, store=args.store)  # type: ignore[attr-defined]
    waiting = [turn for turn in chat.all_turns() if turn.state == "waiting"]
    if not waiting:
        print(f"nothing waits in conversation {args.id!r}", file=out)
        return 1
    status = 0
    for turn in waiting:
        for approval in turn.approvals:
            verdict = f"denied ({args.deny})" if args.deny is not None else "approved"
            print(f"{turn.id}: {approval['name']} {_short(approval['input'], 40)} — {verdict}", file=out)
        if args.deny is not None:
            turn.deny(reason=args.deny or None, by=args.by)
        else:
            turn.approve(by=args.by)
        try:
            answer = turn.resume()
        except Waiting as again:
            asks = ", ".join(a["name"] for a in again.approvals)
            print(f"{turn.id}: waits again, for {asks}", file=out)
            status = 3
            continue
        except FunctAIError as error:
            print(f"{turn.id}: failed: {error}", file=out)
            status = 2
            continue
        print(f"{turn.id}: {_short(answer, 200)}", file=out)
    return status


BUILTINS_GROUP = "functai.builtins"


def _discover() -> "Installed":
    """A fresh discovery (not the process's cached one).

    A plugin that fails to load is warned about; the listing says the same,
    so the warning is not repeated.
    """
    import warnings

    from .hooks.installed import Installed

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return Installed.discover()


def _builtins() -> list[dict[str, object]]:
    from .hooks.installed import entry_points

    found = entry_points(BUILTINS_GROUP)
    rows = []
    for entry_point in found:
        dist = getattr(entry_point, "dist", None)
        rows.append({
            "name": entry_point.name,
            "distribution": getattr(dist, "name", None),
            "version": getattr(dist, "version", None),
            "entry_point": entry_point.value,
            "providers": sum(1 for other in found if other.name == entry_point.name),
        })
    return rows


def _state(plugin: dict[str, object]) -> str:
    state = str(plugin["state"])
    return f"{state}: {plugin['reason']}" if plugin["state"] == "failed" else (
        f"{state} ({plugin['reason']})" if plugin["reason"] else state
    )


def _table(rows: list[list[str]], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths)]
        print(("  ".join(cells) + "  " + row[-1]).rstrip(), file=out)


def cmd_plugins(args: argparse.Namespace, out: TextIO) -> int:
    """List installed plugins with their state; exit 0 even when one failed (a diagnostic)."""
    from .hooks.installed import FAILED, GROUP

    found = _discover()
    plugins = []
    for item in found.found:
        data = item.as_dict()
        data["distribution_version"] = item.dist_version
        plugins.append(data)
    builtins = _builtins()
    if args.json:
        print(json.dumps({"plugins": plugins, "builtins": builtins}, indent=2, ensure_ascii=False), file=out)
        return 0

    if not plugins:
        print(f"no installed plugins (entry-point group {GROUP!r})", file=out)
    else:
        print(f"installed plugins (entry-point group {GROUP!r}):", file=out)
        rows = [["NAME", "VERSION", "DISTRIBUTION", "API", "HOOKS", "STATE"]]
        for plugin in plugins:
            rows.append([
                str(plugin["name"]),
                str(plugin["version"] or "-"),
                str(plugin["distribution"] or "-"),
                "-" if plugin["api"] is None else str(plugin["api"]),
                ",".join(plugin["hooks"]) or "-",  # type: ignore[arg-type]
                _state(plugin),
            ])
        _table(rows, out)
    failed = [str(plugin["name"]) for plugin in plugins if plugin["state"] == FAILED]
    if failed:
        already = [name for name in (os.environ.get("FUNCTAI_DISABLE_PLUGINS") or "").split(",") if name.strip()]
        disable = ",".join(dict.fromkeys([*already, *failed]))
        print(
            f"{len(failed)} plugin{'s' if len(failed) > 1 else ''} failed to load ({', '.join(failed)}): every call "
            f"refuses plugin-load until {'they are' if len(failed) > 1 else 'it is'} fixed, uninstalled, "
            f"or disabled with FUNCTAI_DISABLE_PLUGINS={disable}",
            file=out,
        )
    if builtins:
        print(f"\nbuilt-in factories (entry-point group {BUILTINS_GROUP!r}):", file=out)
        rows = [["NAME", "DISTRIBUTION", "VERSION", "ENTRY POINT"]]
        for row in builtins:
            note = ""
            if row["providers"] != 1:
                note = f"  ({row['providers']} distributions provide {row['name']!r}: uninstall all but one)"
            rows.append([str(row["name"]), str(row["distribution"] or "-"), str(row["version"] or "-"),
                         f"{row['entry_point']}{note}"])
        _table(rows, out)
    return 0


def cmd_rate(args: argparse.Namespace, out: TextIO) -> int:
    from .errors import FunctAIError
    from .evaluation import rate

    folder = _log_folder(args.log)
    matches = {r.id for r in read_calls(folder) if r.id.startswith(args.id)}
    if len(matches) > 1:
        print(f"{args.id!r} matches {len(matches)} calls; give more of the id", file=sys.stderr)
        return 1
    try:
        rating = rate(matches.pop() if matches else args.id, good=args.good, correction=args.correction,
                      by=args.by, log=folder)
    except FunctAIError as error:
        print(error, file=sys.stderr)
        return 1
    verdict = "good" if rating.good else "bad"
    fix = f", correction {_short(rating.correction)}" if rating.correction is not None else ""
    print(f"rated {rating.call} {verdict}{fix}" + (f" (by {rating.by})" if rating.by else ""), file=out)
    return 0


def cmd_evaluate(args: argparse.Namespace, out: TextIO) -> int:
    from .errors import FunctAIError
    from .evaluation import evaluate

    program = _import_program(args.function)
    try:
        result = evaluate(program, log=_log_folder(args.log), workers=args.workers)
    except FunctAIError as error:
        print(error, file=sys.stderr)
        return 1
    print(result.table(), file=out)
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

    conversation = sub.add_parser("conversation", help="a conversation's turn tree, with states and entries")
    conversation.add_argument("store", help="the store folder")
    conversation.add_argument("id", help="the conversation id")
    conversation.set_defaults(run=cmd_conversation)

    approve = sub.add_parser("approve", help="answer a waiting turn's approvals and resume it")
    approve.add_argument("store", help="the store folder")
    approve.add_argument("id", help="the conversation id")
    approve.add_argument("--deny", metavar="REASON", nargs="?", const="", help="refuse instead (with a reason)")
    approve.add_argument("--by", help="who answers (kept with the answer)")
    approve.set_defaults(run=cmd_approve)

    plugins = sub.add_parser("plugins", help="installed plugins and their state (works while one is broken)")
    plugins.add_argument("--json", action="store_true", help="print JSON instead of a table")
    plugins.set_defaults(run=cmd_plugins)

    rate = sub.add_parser("rate", help="rate a logged call, good or bad")
    rate.add_argument("id", help="the call id (a unique prefix is enough)")
    verdict = rate.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--good", dest="good", action="store_true", help="the answer was good")
    verdict.add_argument("--bad", dest="good", action="store_false", help="the answer was bad")
    rate.add_argument("--correction", help="the answer it should have given")
    rate.add_argument("--by", help="who rates")
    rate.add_argument("--log", help=f"the call log folder (default: $FUNCTAI_LOG_CALLS or {DEFAULT_LOG})")
    rate.set_defaults(run=cmd_rate)

    evaluate = sub.add_parser("evaluate", help="ask a function again on its rated calls; print the score")
    evaluate.add_argument("function", help="MODULE:FUNCTION (importable from here)")
    evaluate.add_argument("--log", help=f"the call log folder (default: $FUNCTAI_LOG_CALLS or {DEFAULT_LOG})")
    evaluate.add_argument("--workers", type=_positive, default=None, help="rows asked at once (default 4)")
    evaluate.set_defaults(run=cmd_evaluate)

    demo = sub.add_parser("demo", help="run a small program (offline unless FUNCTAI_LM names a model)")
    demo.set_defaults(run=cmd_demo)
    return top


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.run(args, out or sys.stdout))
