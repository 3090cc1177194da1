"""``functai plugins explain MODULE:FUNCTION`` and ``functai plugins --verbose``."""

import io
import json
import textwrap

import pytest

import functai
from functai import Change, Plugin
from functai._cli import main
from functai._hooks.explain import explain

APP = textwrap.dedent('''
    import functai
    from functai import Change, Plugin, ai, tool

    def add(call):
        return Change(sections=["x"])

    brief = Plugin("brief", version="1.0.0", before_call=add)
    shared = Plugin("shared", version="2.0.0", tool_call=lambda tool: None)
    audit = Plugin("audit", version="3.0.0", call_end=lambda call: None, before_call=add)

    @tool
    def refund(order: str) -> str:
        """Refund."""
        return "ok"

    @ai(tools=[refund], plugins=[brief, shared])
    def support(question: str) -> str:
        """Answer."""

    functai.configure(plugins=[audit, shared])
''')


@pytest.fixture
def app(tmp_path, monkeypatch):
    (tmp_path / "explain_app.py").write_text(APP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    import sys

    sys.modules.pop("explain_app", None)


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    status = main(list(args), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def test_explain_prints_each_hook_in_order_with_layers_and_dropped_duplicates(app, installed_plugins):
    installed_plugins("approval")
    status, out, err = run("plugins", "explain", "explain_app:support")
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0] == "explain_app:support: plugins its calls would run here, hook by hook, in order"
    assert lines[1] == "layers (innermost first): own: brief, shared; process: audit, shared; installed: approval"
    at = lines.index("before_call:")
    assert lines[at + 1:at + 5] == [
        "  1. brief 1.0.0 [own] explain_app.add",
        "     why: own layer, #1 in its list",
        "  2. audit 3.0.0 [process] explain_app.add",
        "     why: process layer, #1 in its list",
    ]
    at = lines.index("tool_call:")
    assert lines[at + 1].startswith("  1. shared 2.0.0 [process] explain_app.<lambda>")
    assert lines[at + 3].startswith("  2. approval ") and "[installed]" in lines[at + 3]
    assert lines[at + 4] == ("     why: installed layer, #1 in its list; declares last=True: runs after every other "
                             "tool_call handler")
    assert "turn_start: -" in lines and "reply: -" in lines
    assert lines[lines.index("call_end:") + 1] == "  1. audit 3.0.0 [process] explain_app.<lambda>"
    assert lines[lines.index("dropped:") + 1] == (
        "  shared 2.0.0 [own]: also in the process layer; it runs once, there")
    assert "unmet: none" in lines


def test_explain_json_and_program_plugins_false(app):
    import explain_app

    functai.configure(program_plugins=False)
    status, out, err = run("plugins", "explain", "explain_app:support", "--json")
    assert status == 0, err
    data = json.loads(out)
    assert [row["plugin"] for row in data["hooks"]["before_call"]] == ["audit"]
    assert {row["plugin"]: row["reason"] for row in data["dropped"]} == {
        "brief": "program_plugins=False in the process layer drops the function's own plugins",
        "shared": "program_plugins=False in the process layer drops the function's own plugins",
    }
    assert explain_app.support.own.plugins  # the function itself is unchanged


def test_explain_sees_settings_blocks_innermost_first():
    from functai import ai

    @ai(plugins=[Plugin("own", before_call=lambda c: None)])
    def f(x: str) -> str:
        """F."""

    outer, inner = Plugin("outer", before_call=lambda c: None), Plugin("inner", before_call=lambda c: None)
    with functai.settings(plugins=[outer]), functai.settings(plugins=[inner, Plugin("own", before_call=lambda c: None)]):
        data = explain(f)
    assert [(r["plugin"], r["layer"]) for r in data["hooks"]["before_call"]] == [
        ("inner", "block"), ("own", "block"), ("outer", "block")]
    assert data["dropped"][0]["plugin"] == "own" and data["dropped"][0]["layer"] == "own"


def test_explain_refuses_what_is_not_an_ai_function(app):
    status, out, err = run("plugins", "explain", "explain_app:brief")
    assert status == 2 and "not an AI function" in err
    status, out, err = run("plugins", "explain", "nowhere:thing")
    assert status == 2 and "no module named 'nowhere'" in err


def test_plugins_verbose_describes_each_loaded_plugin():
    # `functai plugins` lists this environment's installed plugins: functai-approval is one (README's install)
    from functai_approval import plugin as approval

    status, out, err = run("plugins", "--verbose")
    assert status == 0, err
    assert "\n" + approval.describe() + "\n" in out
    assert any(line.startswith("  tool_call: functai_approval.") for line in approval.describe().splitlines())
    quiet = run("plugins")[1]
    assert approval.describe() not in quiet
