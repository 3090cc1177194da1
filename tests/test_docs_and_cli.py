"""The hook reference matches the hookspecs; the CLI; import stays light."""

import json
import pathlib
import subprocess
import sys

import functai
from functai import Plugin, Change, ai
from functai._cli import main
from functai._hooks import specs
from functai._hooks.change import HOOK_FIELDS
from functai.testing import ScriptedLM

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _reference():
    """``docs/hook_reference.py``, the script that writes ``docs/hooks.md``, as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("hook_reference", ROOT / "docs" / "hook_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_hook_reference_is_generated_from_the_hookspecs():
    assert (ROOT / "docs" / "hooks.md").read_text() == _reference().render(), (
        "docs/hooks.md is stale: run python docs/hook_reference.py > docs/hooks.md"
    )


def test_every_hookspec_is_documented_with_its_exact_signature():
    text = (ROOT / "docs" / "hooks.md").read_text()
    assert set(HOOK_FIELDS) == set(specs.HOOKS)
    for hook in specs.HOOKS:
        argument = specs.__dict__[hook].__code__.co_varnames[0]
        assert f"## `{hook}({argument})`" in text
        assert len(specs.__dict__[hook].__doc__.strip()) > 40


def test_import_functai_is_light():
    code = (
        "import sys, functai\n"
        "heavy = [m for m in ('httpx', 'structlog', 'pydantic', 'functai._models.openai') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_import_functai_scans_no_entry_points():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_import", ROOT / "benchmarks" / "bench_import.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)  # the probe the import benchmark reports, run as a test
    assert bench.entry_point_scans() == 0


def _logged_calls(folder):
    functai.configure(client=ScriptedLM(["Lima", "Paris"]), log_calls=str(folder))

    @ai
    def capital(country: str) -> str:
        """The capital city."""

    with functai.settings(plugins=[Plugin("modes", before_call=lambda c: Change(sections=["s"]))]):
        capital("Peru")
    capital("France")
    return list(functai.read_calls(folder))


def test_cli_calls_and_show(tmp_path, capsys):
    records = _logged_calls(tmp_path)
    assert main(["calls", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3
    assert lines[0].split() == ["STARTED", "ID", "FUNCTION", "MODEL", "SECONDS", "STATUS", "CHANGES", "TOOLS"]
    assert lines[1].split()[1:] == [records[0].id, "capital", "scripted", f"{records[0].seconds:.3f}", "ok", "1", "0"]
    assert main(["show", records[0].id[:6], "--log", str(tmp_path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["id"] == records[0].id and shown["changes"][0]["plugin"] == "modes"
    assert main(["show", "nothere", "--log", str(tmp_path)]) == 2


def test_cli_table_columns_align_whatever_the_widths(tmp_path, capsys):
    functai.configure(client=ScriptedLM(["a", "b"]), log_calls=str(tmp_path))

    @ai
    def f(x: str) -> str:
        """Say it."""

    @ai
    def a_function_with_a_rather_long_name_indeed(x: str) -> str:
        """Say it."""

    f("1")
    a_function_with_a_rather_long_name_indeed("2")
    assert main(["calls", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    for column in ("MODEL", "SECONDS", "STATUS", "CHANGES", "TOOLS"):
        at = lines[0].index(column)
        assert all(line[at - 2 : at] == "  " and line[at] != " " for line in lines), column


def test_cli_show_prints_a_readable_view_of_everything_that_shaped_the_call(tmp_path, capsys):
    from functai import tool
    from functai.testing import tool_call

    @tool(effects="reads")
    def look_up(word: str) -> str:
        """Look a word up."""
        return f"{word}: a city"

    @tool(effects="changes")
    def forget(word: str) -> str:
        """Forget a word."""
        return "forgotten"

    def not_here(tool):
        if tool.name == "forget":
            raise functai.FunctAIError("not here", code="not-here")

    guard = Plugin("guard", version="1.2.0", tool_call=not_here)
    modes = Plugin("modes", version="0.3.0", before_call=lambda c: Change(sections=["Answer in one word."]))
    functai.configure(
        client=ScriptedLM([tool_call("look_up", {"word": "Lima"}), tool_call("forget", {"word": "Lima"}), "Lima"]),
        log_calls=str(tmp_path), plugins=[guard],
    )

    @ai(tools=[look_up, forget], plugins=[modes])
    def capital(country: str) -> str:
        """The capital city."""

    _, record = capital.run("Peru")
    assert main(["show", record.id, "--log", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for line in (
        f"call:     {record.id}",
        f"function: {record.module}:capital",
        "path:     capital",
        "model:    scripted",
        "inputs:\n  country = Peru",
        "instruction:\n  The capital city.",
        "changes, by plugin:\n  modes 0.3.0\n    before_call: {\"sections\": [\"Answer in one word.\"]}",
        "tool calls:\n  look_up({\"word\": \"Lima\"})\n    -> Lima: a city",
        "  forget({\"word\": \"Lima\"})\n    blocked by guard: not here",
        "value:\n  Lima",
        "3 model requests",
    ):
        assert line in out, line
    assert "error:" not in out


def test_cli_show_says_the_error_of_a_failed_call(tmp_path, capsys):
    functai.configure(client=ScriptedLM(["not a number", "still not"]), log_calls=str(tmp_path))

    @ai
    def count(text: str) -> int:
        """How many words."""

    try:
        count("a b")
    except functai.FunctAIError:
        pass
    record = list(functai.read_calls(tmp_path))[0]
    assert main(["show", record.id, "--log", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "error: [output-invalid] " in out and "value:" not in out


def _demo(cwd, *args, **env):
    tmp = cwd / "tmp"
    tmp.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "functai", "demo", *args], capture_output=True, text=True, cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp), **env},
    )


def test_demo_runs_offline_and_says_so(tmp_path):
    out = _demo(tmp_path)
    assert out.returncode == 0, out.stderr
    assert "scripted offline model" in out.stdout
    for plugin, layer in (
        ("house-style 1.0.0 before_call", "the function's own"),
        ("careful 0.0.0 before_call", "a block"),
        ("audit 0.2.0 before_call", "the process"),
    ):
        line = out.stdout.index(plugin)
        assert out.stdout[line:].splitlines()[1].strip().startswith(f"(layer: {layer},")
    assert "compaction (layer: a conversation's)" in out.stdout
    assert "[tool delete_note blocked by no-deletes]" in out.stdout
    assert "[tool research ran]" in out.stdout
    assert "compaction folded 2 turns" in out.stdout
    assert "conversation demo-1 (" in out.stdout and "delegate/delegate @" in out.stdout
    # the tool's whole answer, not cut mid-word
    assert "Here is what I found: The notes say: A fraction is a part of a whole: 1/2 is one of two equal parts." \
        in out.stdout


def test_demo_leaves_its_calls_and_conversation_to_look_at_and_says_how(tmp_path):
    out = _demo(tmp_path)
    assert out.returncode == 0, out.stderr
    assert list((tmp_path / "tmp").iterdir()) == []  # nothing left in the temporary directory
    folder = tmp_path / "functai-demo"
    calls = list(functai.read_calls(folder / "calls"))
    assert {r.function for r in calls} >= {"explain", "rate_clarity", "tutor", "research"}
    assert (folder / "conversations" / "demo-1.jsonl").is_file()
    steps = out.stdout[out.stdout.index("Everything the demo did is kept in functai-demo/"):].splitlines()[1:]
    commands = [line.split("#")[0].split() for line in steps]
    assert commands == [
        ["functai", "calls", "functai-demo/calls"],
        ["functai", "show", calls[0].id, "--log", "functai-demo/calls"],
        ["functai", "conversation", "functai-demo/conversations", "demo-1"],
    ]
    assert len({line.index("#") for line in steps}) == 1  # the comments align
    for command in commands:  # each suggested command works, from where the demo ran
        shown = subprocess.run([sys.executable, "-m", "functai", *command[1:]], capture_output=True, text=True,
                               cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
        assert shown.returncode == 0 and shown.stderr == "", shown.stderr
    again = _demo(tmp_path, "--log", "functai-demo")  # a second run starts its own conversation
    assert again.returncode == 0, again.stderr
    assert "conversation demo-2 (" in again.stdout
    elsewhere = _demo(tmp_path, "--log", "other")
    assert elsewhere.returncode == 0 and (tmp_path / "other" / "calls" / "calls.jsonl").is_file()


def test_demo_on_an_unreachable_model_fails_in_one_line(tmp_path):
    out = _demo(tmp_path, FUNCTAI_LM="openai/gpt-4.1-mini", OPENAI_API_KEY="sk-not-a-real-key",
                OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    assert out.returncode == 1
    assert "Traceback" not in out.stderr and "sk-not-a-real-key" not in out.stderr + out.stdout
    assert out.stderr.startswith("functai: error [model-unreachable]: ")
    assert "hint: unset FUNCTAI_LM to run the demo on its scripted offline model" in out.stderr


def test_cli_conversation_prints_a_10000_turn_branch(tmp_path, capsys):
    """The tree is printed by a loop: a long branch is no RecursionError."""
    functai.configure(client=ScriptedLM(["a", "b"]))

    @ai
    def echo(text: str) -> str:
        """Echo."""

    chat = echo.conversation("long", store=str(tmp_path))
    chat("0")
    chat("1")
    path = tmp_path / "long.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    turn = next(r for r in lines if r["kind"] == "turn" and r["parent"] is not None)
    end = next(r for r in lines if r["kind"] == "end" and r["turn"] == turn["turn"])
    more, parent = [], turn["turn"]
    for i in range(2, 10_000):
        tid = f"t{i:011d}"
        more.append({**turn, "turn": tid, "parent": parent, "inputs": {"text": str(i)}})
        more.append({**end, "turn": tid, "outputs": {"output": f"o{i}"}})
        parent = tid
    with open(path, "a") as file:
        file.writelines(json.dumps(record) + "\n" for record in more)
    assert main(["conversation", str(tmp_path), "long"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"conversation long ({echo.module}:{echo.__qualname__}, 10000 turns)"
    assert len(out) == 10_001
    assert out[-1].lstrip().startswith("└─ t00000009999 done") and out[-1].endswith("→ o9999")


def test_cli_conversation_says_1_turn_and_draws_branches(tmp_path, capsys):
    functai.configure(client=ScriptedLM(["a", "b", "c"]))

    @ai
    def echo(text: str) -> str:
        """Echo."""

    chat = echo.conversation("one", store=str(tmp_path))
    first = chat("hello")
    assert first == "a"
    assert main(["conversation", str(tmp_path), "one"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"conversation one ({echo.module}:{echo.__qualname__}, 1 turn)"
    root = chat.head
    chat("again")
    chat.continue_from(root)("other way")
    assert main(["conversation", str(tmp_path), "one"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("3 turns)")
    assert lines[1].startswith("└─ ") and lines[2].startswith("   ├─ ") and lines[3].startswith("   └─ ")


def test_short_text_is_cut_at_a_word():
    from functai._cli.common import short

    assert short("one two three", 60) == "one two three"
    assert short("alpha beta gamma delta epsilon", 20) == "alpha beta gamma…"
    assert short("x" * 30, 10) == "x" * 9 + "…"  # one long word: cut where it must be


def test_functai_log_calls_is_the_process_layers_default_in_the_library(tmp_path, monkeypatch):
    from functai import _layers as layers

    program = (
        "import functai\n"
        "from functai import ai\n"
        "from functai.testing import ScriptedLM\n"
        "@ai\n"
        "def capital(country: str) -> str:\n"
        "    '''The capital city.'''\n"
        "functai.configure(client=ScriptedLM(['Lima']))\n"
        "print(capital('Peru'))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "FUNCTAI_LOG_CALLS": str(tmp_path / "from-env")}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert done.returncode == 0 and done.stdout.strip() == "Lima", done.stderr
    assert [r.output for r in functai.read_calls(tmp_path / "from-env")] == ["Lima"]

    monkeypatch.setenv("FUNCTAI_LOG_CALLS", str(tmp_path / "env"))
    layers.reset()  # the process layer starts from the environment

    @ai
    def capital(country: str) -> str:
        """The capital city."""

    functai.configure(client=ScriptedLM(["Lima", "Paris", "Rome"]))
    capital("Peru")
    with functai.settings(log_calls=str(tmp_path / "block")):  # a closer layer wins
        capital("France")
    functai.configure(log_calls=None)  # unset like any process setting
    capital("Italy")
    assert [r.output for r in functai.read_calls(tmp_path / "env")] == ["Lima"]
    assert [r.output for r in functai.read_calls(tmp_path / "block")] == ["Paris"]


def test_cli_show_names_who_edited_what_a_reconcile_settled_and_prints_no_python_dicts(tmp_path, capsys):
    import attrs

    from functai._calls.records import append

    records = _logged_calls(tmp_path)
    record = attrs.evolve(
        records[0], id="b" * 16,
        conversation={"id": "c", "turn": "t1", "parent": None, "shown": {"last": 2}},
        changes=[{"plugin": "approval", "version": "0.1.0", "hook": "tool_call", "by": "ana",
                  "change": {"inputs": {"amount": 60}}}],
        tool_calls=[{"name": "refund", "id": "call_1", "input": {"amount": 60}, "output": "refunded 60",
                     "reconciled": True}])
    append(str(tmp_path), record)
    assert main(["show", "bbbb", "--log", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "conversation: id c, turn t1, shown {\"last\": 2}" in out
    assert "{'" not in out  # JSON, never a Python repr
    assert '    tool_call by ana: {"inputs": {"amount": 60}}' in out.splitlines()
    assert "    -> refunded 60  (settled by its reconcile after a crash)" in out.splitlines()
