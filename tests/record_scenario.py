"""A fixed scenario whose records must not change when the plugin engine is made faster.

Ten plugins, each with a handler for every hook (turn_start, context,
before_call, request, reply, tool_call, tool_result, call_end, turn_end),
make a known set of changes over a three-turn conversation in a folder store,
a plain call, a call with ``log_content=False`` and a timed call. `run`
returns what every reader of the records sees: ``record.changes`` and
``to_dict()`` of each returned record, the record as a ``call_end`` handler
reads it, the call log read back with ``functai.read_calls`` and line by line,
and the changes and context the conversation store keeps for each turn — with
ids, times and durations replaced by placeholders.

``tests/data/records_10_plugins.json`` was written by this file run as a
script against the engine before it was reworked (issue 15)::

    PYTHONPATH=<checkout of the old engine> python tests/record_scenario.py > tests/data/records_10_plugins.json

``tests/test_record_equality.py`` compares a fresh run with it.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping

import attrs

import functai
from functai import Change, Plugin, ai
from functai.testing import ScriptedLM, tool_calls

N_PLUGINS = 10


@functai.tool(effects="reads")
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@functai.tool(effects="changes")
def delete_note(note: str) -> str:
    """Delete a note."""
    return f"deleted {note}"


@ai(tools=[lookup, delete_note])
def assist(request: str, level: str = "basic") -> str:
    """Help with the request."""


class _Awaited:
    """Registers each changing handler as an ``async def`` wrapper of itself."""

    HEARING = ("reply", "call_end", "turn_end")

    def __init__(self, plugin: Plugin) -> None:
        self.plugin = plugin

    def __getattr__(self, hook: str) -> Any:
        def register(fn: Any) -> Any:
            if hook in self.HEARING:
                return self.plugin.on(hook, fn)

            async def handler(event: Any) -> Any:
                return fn(event)

            self.plugin.on(hook, handler)
            return fn

        return register


def _thaw(value: Any) -> Any:
    """A record view's read-only values as plain JSON data."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "items"):
        return {key: _thaw(item) for key, item in value.items()}
    return [_thaw(item) for item in value]


def make_plugin(i: int, heard: list[Any], awaited: bool = False) -> Plugin:
    """Plugin ``p<i>``: what each of its handlers does depends on ``i``.

    ``awaited``: its changing handlers are ``async def`` (same results).
    """
    plugin = Plugin(f"p{i}", version=f"1.{i}.0")
    if awaited:
        plugin = _Awaited(plugin)

    @plugin.turn_start
    def turn_start(turn: Any) -> Any:
        if i == 0:
            return Change(inputs={"level": "advanced"})
        if i == 2:
            return Change(inputs={"request": turn.inputs["request"].upper()})
        if i == 4:
            return Change()  # sets nothing: not recorded
        return None

    @plugin.context
    def context(ctx: Any) -> Any:
        ids = [t.id for t in ctx.turns]
        if i == 3:
            return Change(sections=[f"Context from p3 ({len(ids)} turns).", "  "])
        if i == 4 and len(ids) >= 2:
            return Change(keep=ids[-2:])
        if i == 5 and ids:
            return Change(without=["level"])
        if i == 6 and ids:
            return Change(without={ids[-1]: ["output", "request"]})
        return None

    @plugin.before_call
    def before_call(call: Any) -> Any:
        if i == 1:
            return Change(instruction="Help carefully with the request.", sections=["p1 first."])
        if i == 2:
            return Change(lm="scripted-large")
        if i == 3:
            return Change(settings={"temperature": 0.25, "stop": ["END"]})
        if i == 4:
            return Change(tools=["lookup", "delete_note"], sections=("p4 tools.",))
        if i == 5:
            return Change(settings={"max_tokens": 64})
        if i == 7:
            return Change()
        if i == 8 and call.conversation is not None:
            call.remember("seen", {"function": call.function, "sections": len(call.sections)})
            return None
        return Change(sections=[f"Rule {i}."])

    @plugin.request
    def request(req: Any) -> Any:
        if i == 6 and req.request.settings.get("seed") is None:
            return attrs.evolve(req.request, settings={**req.request.settings, "seed": 7})
        if i == 7:
            return req.request  # handed back unchanged: not recorded
        return None

    @plugin.reply
    def reply(event: Any) -> None:
        heard.append(("reply", f"p{i}", event.attempt))

    @plugin.tool_call
    def tool_call(tool: Any) -> Any:
        if i == 0 and tool.name == "lookup":
            return Change(inputs={"key": tool.input["key"] + "-2"})
        if i == 5 and tool.name == "lookup":
            try:
                tool.remember("looked", {"key": tool.input["key"], "seen": len(tool.entries("looked"))})
            except ValueError:  # outside a conversation
                pass
            return Change(inputs={"key": tool.input["key"] + "-5"})
        if i == 9 and tool.name == "delete_note":
            return Change(block="notes are never deleted here")
        return None

    @plugin.tool_result
    def tool_result(result: Any) -> Any:
        if i == 1:
            return Change(output=f"[{result.output}]")
        if i == 8:
            return Change(output=result.output + " (checked by p8)")
        return None

    @plugin.call_end
    def call_end(event: Any) -> None:
        if i == 9:  # what a hearing handler reads of the record
            heard.append(("call_end", _thaw(event.record.changes), event.record.to_dict()))

    @plugin.turn_end
    def turn_end(turn: Any) -> None:
        heard.append(("turn_end", f"p{i}", turn.state))

    return plugin.plugin if awaited else plugin


def model(request: Any) -> Any:
    """Asks for both tools once per call, then answers."""
    if request.messages[-1]["role"] == "tool":
        return "answered after tools"
    if "tools please" in request.messages[-1]["content"].lower():
        return tool_calls([("lookup", {"key": "k"}), ("delete_note", {"note": "n1"})])
    return "answered"


_ID = re.compile(r"\b(?:[0-9a-f]{16}|[0-9a-f]{12}|call_\d+)\b")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:\+00:00|Z)?")
_VARYING = {"started": "<time>", "at": "<time>", "seconds": "<seconds>", "µs": "<µs>"}


class Normalizer:
    """Ids become ``<id N>`` in order of first appearance; times and durations become placeholders."""

    def __init__(self, folder: Path) -> None:
        self.folder = str(folder)
        self.ids: dict[str, str] = {}

    def text(self, value: str) -> str:
        value = _TIME.sub("<time>", value.replace(self.folder, "<folder>"))
        return _ID.sub(lambda m: self.ids.setdefault(m.group(0), f"<id {len(self.ids) + 1}>"), value)

    def __call__(self, value: Any, key: str | None = None) -> Any:
        if key in _VARYING and value is not None:
            return _VARYING[key]
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.text(k): self(v, k) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self(v) for v in value]
        return value


def run(folder: Path, mode: str = "sync") -> dict[str, Any]:
    """Run the scenario in ``folder``; what every reader of its records sees, normalized.

    ``mode="async"``: the same calls awaited, with ``async def`` handlers for
    the changing hooks of plugins p0–p4 (the records must be the same).
    """
    from functai._hooks import installed
    from functai._layers import reset

    reset()
    installed_before = installed.use(installed.Installed.of([]))  # no plugin of this machine's
    heard: list[Any] = []
    plugins = [make_plugin(i, heard, mode == "async" and i < 5) for i in range(N_PLUGINS)]
    lm = ScriptedLM(reply=model)
    calls = str(folder / "calls")
    functai.configure(client=lm, log_calls=calls)
    returned: list[Any] = []

    async def calls_async() -> None:
        await chat.acall("Tools please: first")
        await chat.acall("second")
        await chat.acall("third", level="expert")
        with functai.settings(plugins=plugins[:5]):
            returned.append((await assist.arun("Tools please, outside a conversation"))[1])
            with functai.settings(log_content=False):
                returned.append((await assist.arun("without content"))[1])
            with functai.settings(record_timing=True):
                returned.append((await assist.arun("Tools please, timed"))[1])

    try:
        with functai.settings(plugins=plugins[5:]):
            chat = assist.conversation("golden", store=str(folder / "store"), plugins=plugins[:5])
            if mode == "async":
                asyncio.run(calls_async())
            else:
                chat("Tools please: first")
                chat("second")
                chat("third", level="expert")
                with functai.settings(plugins=plugins[:5]):
                    returned.append(assist.run("Tools please, outside a conversation")[1])
                    with functai.settings(log_content=False):
                        returned.append(assist.run("without content")[1])
                    with functai.settings(record_timing=True):
                        returned.append(assist.run("Tools please, timed")[1])
    finally:
        reset()
        installed.use(installed_before)
    norm = Normalizer(folder)
    log_lines = [json.loads(line) for line in Path(calls, "calls.jsonl").read_text(encoding="utf-8").splitlines()]
    store_lines = [json.loads(line) for line in Path(folder, "store", "golden.jsonl").read_text(encoding="utf-8").splitlines()]
    kept = [  # the store's turn and tool lines: the changes (and context) they keep
        {key: line[key] for key in ("kind", "site", "changes", "context") if key in line}
        for line in store_lines if "changes" in line
    ]
    entries = [line.get("data") for line in store_lines if line.get("kind") == "entry"]
    return norm({
        "returned": [{"changes": r.changes, "record": r.to_dict()} for r in returned],
        "log": log_lines,
        "read_calls": [r.to_dict() for r in functai.read_calls(calls)],
        "heard": heard,
        "store_changes": kept,
        "store_entries": entries,
        "requests": [{"model": r.model, "system": r.messages[0]["content"], "settings": r.settings} for r in lm.requests],
    })


def main() -> int:
    import record_scenario  # by its module name, as the test imports it: records name the module

    with tempfile.TemporaryDirectory() as folder:
        data = record_scenario.run(Path(folder))
    json.dump(data, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
