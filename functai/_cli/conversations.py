"""``functai conversation`` (a turn tree), ``functai approve`` (answer a waiting turn, resume it)
and ``functai resume`` (resume or abandon an interrupted turn)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, Mapping, TextIO

from .._calls.toolinputs import read_typed
from .._log import quiet
from .._errors import FunctAIError, Waiting
from .._runners import find_runner
from .._stores.opening import open_store
from .._stores.urls import redact
from .common import RUNNER_HELP, RUNTIME, CLIError, ai_function, history, plural, require_model, short, store_folder

if TYPE_CHECKING:
    from .._conversations.history import History


def register(commands: Any) -> None:
    conversation = commands.add_parser("conversation", help="a conversation's turn tree, with states and entries")
    _conversation_arguments(conversation)
    conversation.set_defaults(run=cmd_conversation)

    approve = commands.add_parser(
        "approve", help="answer a waiting turn's approvals and resume it",
        description="Answer every waiting turn's approvals and resume it. Exit status: 0 answered and done, "
        "1 a turn failed, 2 bad input, 3 a turn waits again.",
    )
    _conversation_arguments(approve, by="who answers (kept with the answer)",
                            id_help="the conversation id, or the id of one waiting turn")
    answer = approve.add_mutually_exclusive_group()
    answer.add_argument("--deny", metavar="REASON", nargs="?", const="", help="refuse instead (with a reason)")
    answer.add_argument("--input", metavar="NAME=VALUE", action="append", default=[],
                        help="approve with this input of the tool changed (repeatable; VALUE is read as JSON when it "
                             "is JSON and the input takes it, else as text); the one approval waiting, or the one "
                             "--key names")
    answer.add_argument("--extend", metavar="AMOUNT", type=float,
                        help="grant this much more to a question a plugin asked before a request (a budget's), "
                             "instead of what it offered")
    approve.add_argument("--key", help="answer only this approval (a key `functai conversation` shows)")
    approve.set_defaults(run=cmd_approve)

    resume = commands.add_parser(
        "resume", help="resume the turns a dead process left interrupted, and waiting turns already answered",
        description="Resume every interrupted turn of the conversation — tools that started and never recorded "
        "a result are settled by their reconcile, else not run again unless named with --rerun — or abandon "
        "them with --abandon; and every waiting turn whose approvals were all answered (in the console, by "
        "Conversation.open(...).turn(ID).approve()). Exit status: 0 done, 1 a turn failed, stays interrupted "
        "(its reconcile raised) or nothing is interrupted or answered, 2 bad input, 3 a turn waits for an approval.",
    )
    _conversation_arguments(resume, by="who abandons (kept with the record)")
    how = resume.add_mutually_exclusive_group()
    how.add_argument("--abandon", metavar="REASON", nargs="?", const="",
                     help="abandon them instead, and every turn that waits for an answer (with a reason); needs no "
                          "model and no importable function")
    how.add_argument("--rerun", metavar="TOOL", action="append", default=[],
                     help="run this tool again: one that started without a recorded result, when it has no reconcile "
                          "or its reconcile says it had no effect (repeatable)")
    resume.add_argument("--runner", metavar="NAME", help=RUNNER_HELP)
    resume.set_defaults(run=cmd_resume)


def _conversation_arguments(command: argparse.ArgumentParser, by: str | None = None,
                            id_help: str = "the conversation id") -> None:
    """STORE and ID; with ``by`` (its help), also a resuming command's ``--by`` and ``--function``."""
    command.add_argument("store", help="the store: a folder or a sqlite:/postgresql: URL")
    command.add_argument("id", help=id_help)
    if by is not None:
        command.add_argument("--by", help=by)
        command.add_argument("--function", metavar="PATH.py:NAME",
                             help="the conversation's function, for one a script made (recorded as __main__:NAME)")


def _state(turn: Any) -> tuple[str, str | None]:
    """A turn's state as shown, and why it is interrupted: a running turn whose owner is
    gone shows as interrupted though no process marked it yet."""
    from .._conversations.held import why_gone

    if turn.state == "running":
        gone = why_gone(turn)
        return ("interrupted", gone) if gone is not None else ("running", None)
    return turn.state, turn.why


def _describe(turn: Any, answered_with: Mapping[str, Any]) -> str:
    """A turn's line in the tree; ``answered_with``: its answers' details by key (an edit, who gave it)."""
    what = short(dict(turn.inputs))
    state, why = _state(turn)
    if state == "interrupted":
        what += f"  interrupted: {why}"
    elif turn.state == "done":
        what += f"  → {short(turn.outputs.get('output', turn.outputs))}"
    elif turn.state == "waiting":
        asks = ", ".join(f"{asked(a, answered_with.get(a['key'], {}).get('inputs'))} ({a['plugin']})"
                         f"{_given(turn.answers.get(a['key']), answered_with.get(a['key']))}" for a in turn.approvals)
        if answered(turn):
            what += f"  answered, to resume: {asks}"
        else:
            what += f"  waits for: {asks}"
    elif turn.error:
        what += f"  ({turn.error.get('code')})"
    return what


def answered(turn: Any) -> bool:
    """Whether every approval a waiting turn asks was answered (it only waits to be resumed)."""
    return bool(turn.approvals) and all(a["key"] in turn.answers for a in turn.approvals)


def _given(answer: Any, details: Mapping[str, Any] | None = None) -> str:
    """An answer as `functai conversation` shows it beside its question ("" when none was given);
    an approval with an edit says who made it (the question is shown as edited)."""
    if answer is None:
        return ""
    allow, reason = (answer["allow"], answer.get("reason")) if isinstance(answer, dict) else answer
    details = answer if isinstance(answer, dict) else details or {}
    if allow and details.get("inputs"):
        return f" — approved, edited by {details.get('by') or 'the approver'}"
    return " — approved" if allow else f" — denied{f' ({reason})' if reason else ''}"


def asked(approval: Any, inputs: Any = None) -> str:
    """What a question is about: a tool call and its input (as edited), or the question a plugin
    asked before a request, with the extension it offers."""
    if approval.get("kind") == "request":
        offer = approval.get("extend")
        return short(approval.get("question") or "", 80) + ("" if offer is None else f" (offers {offer:g} more)")
    return f"{approval['name']} {short({**approval['input'], **(inputs or {})}, 40)}"


def tree(found: "History", out: TextIO) -> None:
    """Print the turn tree, depth first; a loop, so any depth prints."""
    states = {turn_id: _state(turn)[0] for turn_id, turn in found.turns.items()}
    width = max(map(len, states.values()), default=0)

    def below(parent: str | None, prefix: str) -> list[tuple[str, str, bool]]:
        children = found.children.get(parent, [])
        return [(child, prefix, i == len(children) - 1) for i, child in enumerate(children)][::-1]

    stack = below(None, "")
    while stack:
        turn_id, prefix, last = stack.pop()
        print(f"{prefix}{'└─ ' if last else '├─ '}{turn_id} {states[turn_id]:<{width}} "
              f"{_describe(found.turns[turn_id], found.answered.get(turn_id, {}))}", file=out)
        stack += below(turn_id, prefix + ("   " if last else "│  "))


def skipped_lines(store: str, conversation: str, found: "History") -> list[tuple[str, str]]:
    """The conversation's lines that could not be used, ``(<file>:<line>, reason)``, in file order."""
    from .._conversations.context import record_place

    opened = open_store(store_folder(store))
    skipped = getattr(opened, "skipped", None)
    lines = list(skipped(conversation)) if callable(skipped) else []
    lines += [(record_place(opened, conversation, index), reason) for index, reason in found.damage]

    def line_number(item: tuple[str, str]) -> int:
        number = item[0].rpartition(":")[2]
        return int(number) if number.isdigit() else 0

    return sorted(lines, key=line_number)


def cmd_conversation(args: argparse.Namespace, out: TextIO) -> int:
    with quiet():  # what is skipped is listed below, not logged
        found = history(args.store, args.id)
        skipped = skipped_lines(args.store, args.id, found)
    header = found.header or {}
    print(f"conversation {args.id} ({header.get('function', '?')}, {plural(len(found.order), 'turn')})", file=out)
    tree(found, out)
    interrupted = sum(1 for turn in found.turns.values() if _state(turn)[0] == "interrupted")
    if interrupted:
        print(f"{plural(interrupted, 'interrupted turn')}: `functai resume {redact(args.store)} {args.id}` resumes "
              f"{'it' if interrupted == 1 else 'them'}, `--abandon` gives up", file=out)
    ready = sum(1 for turn in found.turns.values() if turn.state == "waiting" and answered(turn))
    if ready:
        print(f"{plural(ready, 'answered waiting turn')}: `functai resume {redact(args.store)} {args.id}` resumes "
              f"{'it' if ready == 1 else 'them'}", file=out)
    if found.entries:
        print("entries:", file=out)
        for entry in found.entries:
            where = f"@{entry['turn']}" if entry["turn"] else "(every branch)"
            print(f"  {entry['plugin']}/{entry['kind']} {where}: {short(entry['data'])}", file=out)
    if skipped:
        print(f"skipped {plural(len(skipped), 'line')} that could not be used:", file=out)
        for where, reason in skipped:
            print(f"  {where} {reason}", file=out)
    return 0


def open_chat(args: argparse.Namespace, found: "History", fallback: str) -> Any:
    """The conversation, opened with its function (``--function``, else the one its first record names)
    once a model is configured for it. ``fallback`` says what works without it."""
    reference = (found.header or {}).get("function")
    if not reference:
        raise CLIError(f"conversation {args.id!r} does not record its function", code="conversation-function",
                       status=RUNTIME)
    module, _, name = reference.partition(":")
    if args.function is None and module == "__main__":
        raise CLIError(f"conversation {args.id!r} was made by a script run as a program, so its function is "
                       f"recorded as {reference}, which this command cannot import", code="script-function",
                       hint=f"name the script: --function path/to/script.py:{name}; or {fallback}")
    try:
        program = ai_function(args.function or reference)
    except CLIError as error:
        if args.function is None:
            error.hint = f"{reference} is the conversation's function: run this where it is importable, or {fallback}"
        raise
    if module == "__main__" and args.function is not None:
        program.module = module  # the script, loaded here as a module, is what ran as __main__ there
    require_model(program)  # before anything is recorded: an answer that cannot resume strands the turn
    return program.conversation(args.id, store=args.store)


def cmd_approve(args: argparse.Namespace, out: TextIO) -> int:
    only = None  # a turn the command was given instead of its conversation
    try:
        found = history(args.store, args.id)
    except CLIError as error:
        located = _conversation_of(args.store, args.id) if error.code == "not-found" else None
        if located is None:
            raise
        only, args.id, found = args.id, located[0], located[1]
    if not any(turn.state == "waiting" for turn in found.turns.values()):
        raise CLIError(f"nothing waits in conversation {args.id!r}", code="nothing-waiting", status=RUNTIME,
                       hint=f"`functai conversation {redact(args.store)} {args.id}` shows each turn's state")
    chat = open_chat(args, found, "answer in the program: chat.turn(TURN_ID).approve() (or .deny()), then .resume()")
    waiting = [turn for turn in chat.all_turns() if turn.state == "waiting" and only in (None, turn.id)]
    if only is not None and not waiting:
        raise CLIError(f"turn {only!r} is {found.turns[only].state}, not waiting: nothing to answer",
                       code="turn-not-waiting", status=RUNTIME,
                       hint=f"`functai conversation {redact(args.store)} {args.id}` shows each turn's state")
    if args.key is not None or args.input:
        waiting = _the_one(waiting, args.key, bool(args.input))
    changes: Mapping[str, Any] = next((a for a in waiting[0].approvals if args.key in (None, a["key"])), {}) \
        if waiting else {}
    inputs = _edit(args.input, changes)
    waits_again = False
    failures: list[tuple[str, str]] = []  # (message, code)
    for turn in waiting:
        try:
            if args.deny is not None:
                turn.deny(args.key, reason=args.deny or None, by=args.by)
            else:
                turn.approve(args.key or (turn.approvals[0]["key"] if inputs else None), inputs=inputs, by=args.by,
                             extend=args.extend)
        except FunctAIError as error:
            if error.code == "input-invalid":
                raise CLIError(error.message, code=error.code) from error
            if error.code != "approval-answered":
                raise
            print(f"{turn.id}: not answered [approval-answered]", file=out)
            failures.append((error.message + f"; `functai resume {redact(args.store)} {args.id}` goes on with "
                             "the answer that holds", error.code))
            continue
        holding = chat.turn(turn.id).waits[-1]["answers"]  # as recorded: the first answer holds, and its author
        for approval in turn.approvals:
            if args.key is None or approval["key"] == args.key:
                given = holding.get(approval["key"]) or {}
                by = given.get("by")
                reason = given.get("reason")
                verdict = "approved" if given.get("allow") else f"denied ({reason})" if reason else "denied"
                edited = f" (edited by {by or 'the approver'})" if given.get("inputs") else f" by {by}" if by else ""
                extend = given.get("extend")
                granted = f" with {extend:g} more" if extend is not None and given.get("allow") else ""
                print(f"{turn.id}: {asked(approval, given.get('inputs'))} — {verdict}{edited}{granted}", file=out)
        try:
            answer = turn.resume()
        except Waiting as again:
            print(f"{turn.id}: waits again, for {', '.join(asked(a) for a in again.approvals)}", file=out)
            waits_again = True
            continue
        except FunctAIError as error:
            if error.code == "resume-settings":  # answered, and left waiting: this process lacks its plugins
                print(f"{turn.id}: answered, not resumed [{error.code}]: {error.message}; there, "
                      f"`chat.turn({turn.id!r}).resume()` (or `functai resume {redact(args.store)} {args.id}` in a "
                      "process that configures them) goes on", file=out)
                waits_again = True
                continue
            ended = "stays interrupted" if error.code == "reconcile-failed" else "failed"
            print(f"{turn.id}: {ended} [{error.code}]", file=out)
            failures.append((f"turn {turn.id} {ended}: {error.message}", error.code))
            continue
        print(f"{turn.id}: {short(answer, 200)}", file=out)
    if failures:
        message, code = failures[0]
        more = f" (and {len(failures) - 1} more turns)" if len(failures) > 1 else ""
        raise CLIError(message + more, code=code, status=RUNTIME)
    return 3 if waits_again else 0


def _conversation_of(store: str, turn_id: str) -> tuple[str, "History"] | None:
    """The conversation holding turn ``turn_id``, and its history (``functai approve STORE TURN``)."""
    from .._conversations.history import History

    opened = open_store(store_folder(store))
    for name in opened.conversations():
        found = History()
        found.apply_all(opened.read(name))
        if turn_id in found.turns:
            return name, found
    return None


def _edit(given: list[str], approval: Mapping[str, Any]) -> dict[str, Any] | None:
    """``--input NAME=VALUE`` options as an edit of ``approval``'s call, each read as `read_typed` reads
    it; a value the call already has is no edit (as in the console), and None when none is left."""
    if not given:
        return None
    asked = approval.get("input") or {}
    edit: dict[str, Any] = {}
    for item in given:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise CLIError(f"--input {item!r}: write NAME=VALUE", code="input-invalid")
        value = read_typed(text, name, approval.get("parameters") or {})
        if name not in asked or json.dumps(value, sort_keys=True) != json.dumps(asked[name], sort_keys=True):
            edit[name] = value
    return edit or None


def _the_one(waiting: list[Any], key: str | None, edit: bool) -> list[Any]:
    """The waiting turns whose approval ``key`` names (one only with an ``edit``: an edit changes one
    call), or the one approval waiting."""
    if key is not None:
        chosen = [turn for turn in waiting if any(a["key"] == key for a in turn.approvals)]
        if not chosen:
            keys = [a["key"] for turn in waiting for a in turn.approvals]
            raise CLIError(f"no waiting turn waits for {key!r}; waiting: {', '.join(keys)}", code="turn-not-waiting")
        if edit and len(chosen) > 1:  # the same call asked on two branches: each its own tool run
            raise CLIError(f"--input changes one tool call, and {len(chosen)} waiting turns ask for {key!r} "
                           f"({', '.join(turn.id for turn in chosen)}); name the turn: functai approve STORE TURN "
                           "--key ... --input ...", code="input-invalid")
        return chosen
    if len(waiting) != 1 or len(waiting[0].approvals) != 1:
        keys = [a["key"] for turn in waiting for a in turn.approvals]
        raise CLIError(f"--input changes one tool call, and {len(keys)} approvals wait ({', '.join(keys)}); "
                       "name one with --key", code="input-invalid")
    return waiting


def _check_rerun(found: "History", interrupted: list[str], rerun: list[str]) -> None:
    """Refuse a ``--rerun`` tool no interrupted turn started without a result: it would change nothing."""
    started = {tool["entry"].get("name") for turn_id in interrupted
               for tool in found.turns[turn_id].tools.values() if tool.get("state") == "started"}
    unknown = [name for name in rerun if name not in started]
    if unknown:
        can = f"only {', '.join(sorted(map(str, started)))} can be" if started else "no tool can be"
        raise CLIError(f"--rerun {unknown[0]}: no interrupted turn started {unknown[0]!r} without recording "
                       f"its result; {can} run again", code="rerun-not-started")


#: The errors of a resume that leave the turn as it was (not failed), and what is said of the turn.
UNSETTLED = {"reconcile-failed": "stays interrupted",
             "resume-settings": "is not resumed here (it keeps its state)"}


def cmd_resume(args: argparse.Namespace, out: TextIO) -> int:
    from .._conversations import held

    found = history(args.store, args.id)
    store = open_store(args.store)
    held.reap(found, store, args.id)
    interrupted = [turn_id for turn_id in found.order if found.turns[turn_id].state == "interrupted"]
    waiting = [turn_id for turn_id in found.order if found.turns[turn_id].state == "waiting"]
    ready = [turn_id for turn_id in waiting if answered(found.turns[turn_id])]
    if not interrupted and not (waiting if args.abandon is not None else ready):
        also = " or waiting" if args.abandon is not None else ", and none waits with its approvals answered"
        raise CLIError(f"no turn of conversation {args.id!r} is interrupted{also}",
                       code="nothing-interrupted", status=RUNTIME,
                       hint=f"`functai conversation {redact(args.store)} {args.id}` shows each turn's state; "
                            f"`functai approve {redact(args.store)} {args.id}` answers a waiting one")
    if args.abandon is not None:  # records only: works where the function cannot be imported
        for turn_id in [t for t in found.order if t in interrupted or t in waiting]:
            held.abandon(found, store, args.id, turn_id, reason=args.abandon or None, by=args.by)
            print(f"{turn_id}: abandoned", file=out)
        return 0
    _check_rerun(found, interrupted, args.rerun)
    runner = find_runner(args.runner)
    chat = open_chat(args, found, "resume in the program (chat.turn(TURN_ID).resume()), "
                     "or give up on the turns with --abandon")
    waits = False
    unsettled: list[tuple[str, FunctAIError]] = []
    for turn_id in [t for t in found.order if t in interrupted or t in ready]:
        turn = chat.turn(turn_id)
        if turn_id in ready:
            answers = turn.answers
            given = ", ".join(asked(a, (answers.get(a["key"]) or {}).get("inputs")) + _given(answers.get(a["key"]))
                              for a in turn.approvals)
            print(f"{turn_id}: resuming (answered: {given})", file=out)
        else:
            print(f"{turn_id}: resuming (interrupted: {turn.why})", file=out)
        try:
            answer = runner.resume(chat, turn_id, rerun=args.rerun)
        except Waiting as again:
            print(f"{turn_id}: waits for {', '.join(asked(a) for a in again.approvals)}; "
                  f"`functai approve {redact(args.store)} {args.id}` answers", file=out)
            waits = True
            continue
        except FunctAIError as error:
            if error.code not in UNSETTLED:
                raise CLIError(f"turn {turn_id} failed: {error.message}", code=error.code, status=RUNTIME) from error
            print(f"{turn_id}: {UNSETTLED[error.code]} [{error.code}]", file=out)  # nothing ended: the others go on
            unsettled.append((turn_id, error))
            continue
        print(f"{turn_id}: {short(answer, 200)}", file=out)
    if unsettled:
        first, failure = unsettled[0]
        raise CLIError(f"turn {first} {UNSETTLED[failure.code]}: {failure.message}", code=failure.code, status=RUNTIME)
    return 3 if waits else 0
