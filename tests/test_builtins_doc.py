"""docs/builtins.md: the replacement factory example does what the page says."""

import re
import sys

import pytest

import functai
from functai import ai, _builtins as builtins
from functai._hooks import installed
from functai.testing import ScriptedLM

from test_docs_blocks import block


class Dist:
    name, version = "my-compaction", "1.0.0"


class EntryPoint:
    def __init__(self, name, value, target):
        self.name, self.value, self.dist, self._target = name, value, Dist(), target

    def load(self):
        return self._target


@pytest.fixture
def replaced(tmp_path, monkeypatch):
    """The page's my_compaction.py, registered as `compaction` in functai.builtins."""
    toml = block("docs/builtins.md", "# my-compaction/pyproject.toml", "toml")
    entry = re.search(r'^\[project\.entry-points\."functai\.builtins"\]\n(\w+) = "(\w+):(\w+)"$', toml, flags=re.M)
    assert entry, toml
    name, module_name, attribute = entry.groups()
    (tmp_path / f"{module_name}.py").write_text(block("docs/builtins.md", "# my-compaction/my_compaction.py"))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(module_name, None)
    module = __import__(module_name)
    found = [EntryPoint(name, f"{module_name}:{attribute}", getattr(module, attribute))]
    monkeypatch.setattr(installed, "entry_points", lambda group: found if group == builtins.GROUP else [])
    builtins.forget()
    yield module
    builtins.forget()
    sys.modules.pop(module_name, None)


def test_the_replacement_is_what_functai_compaction_returns(replaced):
    plugin = functai.compaction(keep=2)
    assert (plugin.name, plugin.version) == ("compaction", "1.0.0")
    assert functai.compaction(keep=2, every=5, name="short").name == "short"  # the built-in's signature
    with pytest.raises(TypeError, match="does not summarize"):
        functai.compaction(keep=2, summarize=lambda earlier, rows: "")
    with pytest.raises(ValueError):
        functai.compaction(keep=-1)


def test_a_turn_is_shown_only_the_last_keep_turns_and_the_record_says_who(replaced, tmp_path):
    lm = ScriptedLM(["a1", "a2", "a3", "a4", "a5"])
    functai.configure(client=lm, log_calls=str(tmp_path / "calls"))

    @ai
    def echo(text: str) -> str:
        """Echo."""

    chat = echo.conversation("c", plugins=[functai.compaction(keep=2)])
    for text in ("q1", "q2", "q3", "q4", "q5"):
        chat(text)
    shown = [[(m["role"], m["content"]) for m in request.messages[1:]] for request in lm.requests]
    assert [content for _, content in shown[2]] == ["text: q1", "a1", "text: q2", "a2", "text: q3"]  # keep: all
    assert [content for _, content in shown[4]] == ["text: q3", "a3", "text: q4", "a4", "text: q5"]
    records = list(functai.read_calls(tmp_path / "calls"))
    assert records[2].changes == []  # two earlier turns: nothing to leave out
    assert [(c["plugin"], c["version"], c["hook"]) for c in records[4].changes] == [("compaction", "1.0.0", "context")]
