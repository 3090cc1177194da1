"""``functai demo``: a small real program on the model ``FUNCTAI_LM`` names, else a scripted one.

AI functions with plugins in three layers, a tool guarded by a plugin, and a conversation with
compaction and a delegate; then what the records say shaped each answer.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from typing import Any, TextIO

from ._builtins import compaction, delegate
from ._calls.function import ai
from ._calls.reading import read_calls
from ._calls.tools import tool
from ._errors import FunctAIError
from ._hooks.change import Change
from ._hooks.plugin import Plugin
from ._layers import configure, settings as in_settings
from ._cli import main as cli
from ._cli.common import location, table
from ._models.request import Request
from ._stores.opening import open_store
from ._stores.urls import is_url, redact
from .testing import ScriptedLM, tool_call

NOTES = {"fractions": "A fraction is a part of a whole: 1/2 is one of two equal parts."}


@tool(effects="reads")
def read_note(topic: str) -> str:
    """Read the course note on a topic."""
    return NOTES.get(topic, "no note on that topic")


@tool(effects="changes")
def delete_note(topic: str) -> str:
    """Delete the course note on a topic."""
    NOTES.pop(topic, None)
    return "deleted"


house_style = Plugin("house-style", version="1.0.0", description="The program's own voice.")


def no_deletes(tool: Any) -> None:
    if tool.name == "delete_note":
        raise FunctAIError("deleting notes is not allowed here", code="no-deletes")


@house_style.before_call
def one_sentence(call: Any) -> Change:
    return Change(sections=["Answer in one sentence."])


@ai(plugins=[house_style])
def explain(topic: str) -> str:
    """Explain the topic to a curious newcomer."""
    raise NotImplementedError


@ai
def rate_clarity(text: str) -> int:
    """Rate how clear the text is, from 1 (muddled) to 5 (crystal clear)."""
    raise NotImplementedError


@ai
def research(query: str) -> str:
    """Look the query up in the course notes and report what they say."""
    raise NotImplementedError


def _offline_reply(request: Request) -> Any:
    """A scripted model good enough to show every part of the program."""
    system = str(request.messages[0]["content"])
    last = request.messages[-1]
    if system.startswith("Rate how clear"):
        return "4"
    if system.startswith("Summarize a conversation"):
        return "The student asked about fractions and halves; the tutor used the notes."
    if system.startswith("Look the query up"):
        return "The notes say: " + NOTES.get("fractions", "nothing")
    if system.startswith("Tutor the student"):
        if last["role"] == "tool":
            return "Here is what I found: " + str(last["content"])
        question = str(last["content"])
        if "delete" in question:
            return tool_call("delete_note", {"topic": "fractions"})
        if "notes" in question:
            return tool_call("research", {"query": "fractions"})
        return f"Let's work on that ({question.removeprefix('question: ')})."
    return "A plugin is a named set of hooks that returns its changes as data, so every answer can be traced."


#: The layer each of the demo's plugins is given in; any other is installed.
LAYER_OF = {
    "house-style": "the function's own, @ai(plugins=[...])",
    "careful": "a block, with functai.settings(plugins=[...])",
    "audit": "the process, functai.configure(plugins=[...])",
    "no-deletes": "the process, functai.configure(plugins=[...])",
}


def main(out: TextIO = sys.stdout, folder: str = "functai-demo") -> int:
    """Run the demo, keeping its call log in ``folder/calls`` and its conversation in
    ``folder/conversations``, or both in the store a URL ``folder`` names."""
    if is_url(folder):
        calls = store = folder
    else:
        calls = os.path.join(folder, "calls")
        store = os.path.join(folder, "conversations")
    lm = os.environ.get("FUNCTAI_LM")
    if lm:
        print(f"Model: {lm} (from FUNCTAI_LM)", file=out)
        settings: dict[str, Any] = {"lm": lm}
    else:
        print("No model configured (FUNCTAI_LM is not set): running on a scripted offline model.", file=out)
        settings = {"client": ScriptedLM(reply=_offline_reply)}

    audit = Plugin("audit", version="0.2.0", before_call=lambda call: Change(settings={"temperature": 0}))
    guard = Plugin("no-deletes", tool_call=no_deletes)
    configure(plugins=[audit, guard], log_calls=calls, **settings)  # the process layer
    careful = Plugin("careful", before_call=lambda call: Change(sections=["Avoid jargon."]))

    print("\n1. An AI function with plugins in three layers", file=out)
    with in_settings(plugins=[careful]):  # a block layer
        answer, record = explain.run("plugins in functai")
    print(f"   explain('plugins in functai') -> {answer!r}", file=out)
    print(f"   rate_clarity(...) -> {rate_clarity(answer)!r}", file=out)
    print("   what shaped it (the record's changes, in the order they ran, innermost layer first):", file=out)
    for change in record.changes:
        where = LAYER_OF.get(change["plugin"], "installed, entry points of pip-installed packages")
        print(f"     {change['plugin']} {change['version']} {change['hook']}: {json.dumps(change['change'])}", file=out)
        print(f"       (layer: {where})", file=out)

    print("\n2. A conversation with a guarded tool, a delegate and compaction", file=out)
    try:
        extras = [compaction(keep=2, every=2)]
        researcher = delegate(research, description="Look things up in the course notes.")
    except FunctAIError as error:
        print(f"   (skipped: {error.message})", file=out)
        _next_steps(out, folder, calls, record.id, None, None)
        return 0
    print("   plugins: compaction (layer: a conversation's), no-deletes (layer: the process) guards the tools",
          file=out)

    @ai(tools=[read_note, delete_note, researcher])
    def tutor(question: str) -> str:
        """Tutor the student, building on what was said before."""
        raise NotImplementedError

    conversation = _fresh_id(store)
    chat = tutor.conversation(conversation, store=store, plugins=extras)
    for question in ("What is a fraction?", "Check the notes on fractions, please.", "Is 2/4 a half?",
                     "Please delete the fractions note.", "What did we cover?"):
        value = chat(question)
        turn_record = _turn_record(calls, conversation)
        print(f"   > {question}\n     {value}", file=out)
        for call in turn_record.tool_calls if turn_record else ():
            status = f"blocked by {call['blocked']}" if "blocked" in call else "ran"
            print(f"     [tool {call['name']} {status}]", file=out)
    summaries = chat.entries("compaction", "summary")
    if summaries:
        latest = summaries[-1]["data"]
        print(f"   compaction folded {latest['turns']} turns into: {latest['text']!r}", file=out)
    print("\n   The conversation, as `functai conversation` shows it:", file=out)
    cli(["conversation", store, conversation], out)
    _next_steps(out, folder, calls, record.id, store, conversation)
    return 0


def _fresh_id(store: str) -> str:
    """``demo-1``, ``demo-2`` …: each run starts its own conversation."""
    taken = set(open_store(store).conversations())
    return next(name for name in (f"demo-{n}" for n in itertools.count(1)) if name not in taken)


def _turn_record(calls: str, conversation: str) -> Any:
    """The newest call record of a turn's own call in ``conversation``."""
    found = None
    for record in read_calls(calls):
        if record.conversation and record.conversation.get("id") == conversation and "parent" in record.conversation:
            found = record
    return found


def _next_steps(out: TextIO, folder: str, calls: str, call: str, store: str | None, conversation: str | None) -> None:
    calls, store = redact(calls), store and redact(store)  # a password is not printed (libpq reads PGPASSWORD)
    rows = [
        [f"functai calls {calls}", "# every call, one line each"],
        [f"functai show {call} --log {calls}", "# the first call: what shaped its answer"],
    ]
    if store and conversation:
        rows.append([f"functai conversation {store} {conversation}", "# the turn tree and the plugins' entries"])
    print(f"\nEverything the demo did is kept in {location(folder)}. Look at it with:", file=out)
    table(rows, out, indent="   ")
