"""``functai demo``: a small real program, on a real model or a scripted one.

It runs AI functions with plugins in three layers (the function's own, a
block, the process) and prints what each call's record says shaped it. The
model is the one ``FUNCTAI_LM`` names; with none configured it runs on a
scripted offline model, and says so.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

import functai
from functai import Change, Plugin, ai
from functai.models.request import Request
from functai.testing import ScriptedLM


def _offline_reply(request: Request) -> str:
    system = request.messages[0]["content"] if request.messages else ""
    if "Rate how clear" in system:
        return "4"
    return "A plugin is a named set of hooks that returns its changes as data, so every answer can be traced."


house_style = Plugin("house-style", version="1.0.0", description="The program's own voice.")


@house_style.before_call
def one_sentence(call: Any) -> Change:
    return Change(sections=["Answer in one sentence."])


@ai(plugins=[house_style])
def explain(topic: str) -> str:
    """Explain the topic to a curious newcomer."""


@ai
def rate_clarity(text: str) -> int:
    """Rate how clear the text is, from 1 (muddled) to 5 (crystal clear)."""


def main(out: TextIO = sys.stdout) -> int:
    lm = os.environ.get("FUNCTAI_LM")
    if lm:
        print(f"Model: {lm} (from FUNCTAI_LM)", file=out)
        settings: dict[str, Any] = {"lm": lm}
    else:
        print("No model configured (FUNCTAI_LM is not set): running on a scripted offline model.", file=out)
        settings = {"client": ScriptedLM(reply=_offline_reply)}

    audit = Plugin("audit", version="0.2.0", before_call=lambda call: Change(settings={"temperature": 0}))
    functai.configure(plugins=[audit], **settings)
    careful = Plugin("careful", before_call=lambda call: Change(sections=["Avoid jargon."]))

    with functai.settings(plugins=[careful]):
        answer, record = explain.run("plugins in functai")
    print(f"\nexplain('plugins in functai') -> {answer!r}", file=out)
    score, scored = rate_clarity.run(answer)
    print(f"rate_clarity(...) -> {score!r}", file=out)

    print("\nWhat shaped the first call (its record's changes, in the order they ran):", file=out)
    for change in record.changes:
        print(f"  {change['plugin']} {change['version']} {change['hook']}: {json.dumps(change['change'])}", file=out)
    print("\nThe first call's record:", file=out)
    print(json.dumps(record.to_dict(), indent=2, ensure_ascii=False), file=out)
    return 0
