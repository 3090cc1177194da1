"""Write calllog_16777cc/ (a folder call log) and calllog_16777cc.db (the same calls in a SQLite
call log, store schema 2): varied calls (nested, failed, changed by a plugin, rated), written by
whatever functai is on PYTHONPATH. Made with the functai of commit 16777cc:

    PYTHONPATH=<checkout of 16777cc> FUNCTAI_LOAD_PLUGINS= python tests/data/make_calllog_16777cc.py tests/data

tests/test_call_index.py reads both with today's functai, by every filter, and indexes them.
"""
import os
import sys

import functai
from functai import ai
from functai.testing import ScriptedLM, tool_call


class Brief:
    """Adds a rule to every call."""

    name, version = "brief", "1.0.0"

    @functai.hookimpl
    def before_call(self, call):
        return functai.Change(sections=("Be brief.",))


@ai
def inner(text: str) -> str:
    """Shorten the text."""


@functai.tool
def shorten(text: str) -> str:
    """Shorten a text."""
    return inner(text)


@ai(tools=[shorten])
def outer(text: str) -> str:
    """Answer, using shorten."""


def reply(request):
    text = request.messages[-1]["content"]
    if "fail" in text:
        raise functai.ModelError("refused", code="model-refused")
    return "ok " + text[-12:]


where = sys.argv[1]
folder, db = os.path.join(where, "calllog_16777cc"), os.path.join(where, "calllog_16777cc.db")
for log in (folder, "sqlite:///" + os.path.abspath(db)):
    functai.configure(client=ScriptedLM(reply=reply), log_calls=log, plugins=[])
    for n in range(12):
        inner(f"plain {n}")
    with functai.settings(plugins=[Brief()]):
        for n in range(5):
            inner(f"briefed {n}")
    for n in range(3):
        try:
            inner(f"fail {n}")
        except functai.FunctAIError:
            pass
    with functai.settings(lm="other-model"):
        inner("on another model")
    with functai.settings(client=ScriptedLM([tool_call("shorten", {"text": "a long text"}), "short", "done"])):
        outer("nested")  # a call with one nested inside it
    calls = list(functai.read_calls(log))
    functai.rate(calls[0], good=True, by="ann", log=log)
    functai.rate(calls[1], good=False, correction="better", by="bo", log=log)
    functai.rate(calls[0], good=False, by="ann", log=log)  # ann changed her mind: the latest wins
