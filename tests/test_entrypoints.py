"""Discovery's own readers: entry_points.txt lines, requirement checks without packaging, what a first call imports.

The equivalence with importlib_metadata in a real venv is tests/test_entrypoints_venv.py.
"""

import itertools
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest
from packaging.requirements import Requirement

from functai._hooks import entrypoints
from functai._hooks.installed import incompatible
from functai._hooks.requires import Unsure, functai_specifier

ROOT = pathlib.Path(__file__).resolve().parent.parent

OPS = ["==", "!=", "<=", ">=", "<", ">", "~="]
SPECS = ["0", "0.1", "0.1.0", "0.2", "1", "1.0.0.0", "0.0.9", "00.1", "2.0"]


@pytest.mark.parametrize("running", ["0.1.0", "0.1", "1.0", "0.2.5", "1", "10.0.1"])
def test_plain_requirements_are_decided_as_packaging_decides_them(running):
    texts = [f"functai{op}{spec}" for op, spec in itertools.product(OPS, SPECS)]
    texts += [f"functai {op} {spec}.*" for op, spec in itertools.product(("==", "!="), SPECS)]
    texts += [f"functai{a}{x},{b}{y}" for (a, x), (b, y) in itertools.combinations(
        itertools.product((">=", "<", "!=", "~="), ("0.1", "0.2", "1.0")), 2)]
    texts += ["functai", "Functai_", "FUNCTAI>=0.1", "functai-plugin>=9", "functai.x>=9", "attrs>=99"]
    decided = 0
    for text in texts:
        try:
            mine = functai_specifier(text, running)
        except Unsure:
            continue  # packaging answers those (invalid ones too: ~=1, >=1.*)
        decided += 1
        requirement = Requirement(text)
        if requirement.name.lower() != "functai":
            assert mine is None, text
            continue
        assert mine == (str(requirement.specifier), requirement.specifier.contains(running, prereleases=True)), text
    assert decided >= 140  # most shapes are decided here


@pytest.mark.parametrize("text", ["functai>=0.1; python_version > '3'", "functai[x]>=0.1", "functai (>=0.1)",
                                  "functai @ https://example.org/f.zip", "functai>=0.1rc1", "functai===0.1",
                                  "functai>=1.*", "functai~=1"])
def test_other_shapes_are_left_to_packaging(text):
    with pytest.raises(Unsure):
        functai_specifier(text, "0.1.0")


class _Dist:
    name, version = "functai-x", "2.0"

    def __init__(self, requires):
        self.requires = requires


@pytest.mark.parametrize("requires, refused", [
    (["functai>=0.1"], None), (["functai<0.1"], "<0.1"), (["functai>=0.1,<0.1.0"], "<0.1.0,>=0.1"),
    (["functai>=99; python_version < '3'"], None), (["functai>=99; python_version >= '3'"], ">=99"),
    (["functai~=0.0.1"], "~=0.0.1"), (["functai[x]<0.0.1"], "<0.0.1"), (["not a requirement ("], None),
])
def test_incompatible_names_the_range_whichever_reads_it(requires, refused):
    problem = incompatible(_Dist(requires))
    assert (problem is None) if refused is None else f"supports functai{refused}, but this is functai" in problem


def test_entry_points_txt_is_split_as_importlib_metadata_splits_it(tmp_path):
    info = tmp_path / "odd-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: odd\nVersion: 1.0\nSummary: a\n  folded\n\nName: body\n")
    (info / "entry_points.txt").write_text(textwrap.dedent("""
        before = a section: ignored
        # a comment
        [functai]
          spaced   =   mod.sub : attr.inner [extra1, extra2]
        no equals sign: skipped (importlib.metadata would fail on it)
        [ functai ]
        inner = kept:apart
        [functai.stores]
        s=m:f
    """))
    dist = entrypoints.Distribution(str(info))
    assert (dist.name, dist.version, dist.key, dist.requires) == ("odd", "1.0", "odd", None)
    assert dist.entries("functai") == [("spaced", "mod.sub : attr.inner [extra1, extra2]")]
    assert dist.entries(" functai ") == [("inner", "kept:apart")] and dist.entries("functai.stores") == [("s", "m:f")]
    point = entrypoints.EntryPoint("spaced", dist.entries("functai")[0][1], "functai", dist)
    assert (point.module, point.attr, point.extras) == ("mod.sub", "attr.inner", ["extra1", "extra2"])
    assert entrypoints.EntryPoint("x", "os.path:join", "g", dist).load() is os.path.join
    with pytest.raises(ValueError, match="malformed"):
        entrypoints.EntryPoint("x", "not valid!", "g", dist).load()


def test_a_distribution_installed_while_running_is_seen(tmp_path, monkeypatch):
    """A folder's listing is kept only while its modification time stands (functai install, then the table)."""
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert entrypoints.entry_points("functai") == []
    info = tmp_path / "late-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: late\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[functai]\nlate = late:x\n")
    os.utime(tmp_path, ns=(1, 1))  # a new modification time, whatever the file system's clock resolution
    [found] = entrypoints.entry_points("functai")
    assert (found.name, found.value, found.dist.name, found.dist.version) == ("late", "late:x", "late", "1.0")
    shutil.rmtree(info)
    os.utime(tmp_path, ns=(2, 2))
    assert entrypoints.entry_points("functai") == []


FIRST_CALL = textwrap.dedent('''
    import sys
    import functai
    from functai import ai
    from functai.testing import ScriptedLM

    @ai
    def answer(question: str) -> str:
        """Answer."""

    import rules_module  # a hookimpl module given directly: its version is its distribution's
    functai.configure(client=ScriptedLM(["ok"]), plugins=[rules_module])
    try:
        answer.run("q")
    except functai.FunctAIError as error:
        print(error.code)
    from functai._hooks.installed import installed
    print(sorted(item.name + ":" + item.state for item in installed().found if item.name.startswith("needs")))
    from functai._hooks.hookimpls import from_hookimpls
    print(from_hookimpls(rules_module).version)
    print([m for m in ("packaging", "importlib_metadata", "structlog") if m in sys.modules])
''')


def test_a_first_call_discovering_plugins_that_require_functai_imports_neither_packaging_nor_the_backport(tmp_path):
    """Nor does a hookimpl module given directly, whose version is read from its distribution."""
    for name, requirement in (("needs_any", "functai"), ("needs_range", "functai>=0.1,<99"),
                              ("needs_future", "functai>=99")):
        (tmp_path / f"{name}.py").write_text(f"from functai import Plugin\nplugin = Plugin({name!r})\n")
        info = tmp_path / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
                                       f"Requires-Dist: {requirement}\nRequires-Dist: attrs>=1; extra == 'x'\n")
        (info / "entry_points.txt").write_text(f"[functai]\n{name} = {name}:plugin\n")
    (tmp_path / "rules_module.py").write_text("import functai\n\n@functai.hookimpl\ndef before_call(call):\n"
                                              "    return None\n")
    info = tmp_path / "house_rules-2.5.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: house-rules\nVersion: 2.5\n")
    (info / "top_level.txt").write_text("rules_module\n")
    env = {key: value for key, value in os.environ.items() if not key.startswith("FUNCTAI_")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    done = subprocess.run([sys.executable, "-c", FIRST_CALL], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    refused, states, version, imported = done.stdout.strip().splitlines()
    assert refused == "plugin-incompatible"
    assert states == "['needs_any:loaded', 'needs_future:failed', 'needs_range:loaded']"
    assert version == "2.5"
    assert imported == "[]"
