"""The hook reference matches the hookspecs; the CLI; import stays light."""

import json
import pathlib
import subprocess
import sys

import functai
from functai import Plugin, Change, ai
from functai.cli import main
from functai.hooks import reference, specs
from functai.hooks.change import HOOK_FIELDS
from functai.testing import ScriptedLM

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_docs_hook_reference_is_generated_from_the_hookspecs():
    assert (ROOT / "docs" / "hooks.md").read_text() == reference.render(), (
        "docs/hooks.md is stale: run python -m functai.hooks.reference > docs/hooks.md"
    )


def test_every_hookspec_is_documented_with_its_exact_signature():
    text = (ROOT / "docs" / "hooks.md").read_text()
    assert set(HOOK_FIELDS) == set(specs.HOOKS)
    for hook in specs.HOOKS:
        argument = specs.ARGUMENT[hook]
        assert f"## `{hook}({argument})`" in text
        assert len(specs.__dict__[hook].__doc__.strip()) > 40


def test_import_functai_is_light():
    code = (
        "import sys, functai\n"
        "heavy = [m for m in ('httpx', 'structlog', 'pydantic', 'functai.models.openai') if m in sys.modules]\n"
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
    assert len(lines) == 2
    assert records[0].id in lines[0] and "changes=1" in lines[0] and "ok" in lines[0]
    assert main(["show", records[0].id[:6], "--log", str(tmp_path)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["id"] == records[0].id and shown["changes"][0]["plugin"] == "modes"
    assert main(["show", "nothere", "--log", str(tmp_path)]) == 1


def test_demo_runs_offline_and_says_so():
    out = subprocess.run(
        [sys.executable, "-m", "functai", "demo"], capture_output=True, text=True, cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    assert "scripted offline model" in out.stdout
    for plugin in ("house-style 1.0.0 before_call", "careful 0.0.0 before_call", "audit 0.2.0 before_call"):
        assert plugin in out.stdout  # own, block, process
    assert "[tool delete_note blocked by no-deletes]" in out.stdout
    assert "[tool research ran]" in out.stdout
    assert "compaction folded 2 turns" in out.stdout
    assert "conversation demo (" in out.stdout and "delegate/delegate @" in out.stdout
