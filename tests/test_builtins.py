"""The built-in distributions: public API only, and the factories found by name."""

import ast
import pathlib

import pytest

import functai
from functai import FunctAIError, _builtins as builtins

ROOT = pathlib.Path(__file__).resolve().parent.parent
PUBLIC = set(functai.__all__) | {"testing", "evaluation", "__version__"}
PUBLIC_MODULES = {"functai", "functai.testing", "functai.stores", "functai.evaluation", "functai.cli"}  # (README)
SOURCES = sorted(ROOT.glob("functai_builtin_plugins/*/functai_*/**/*.py"))


def private_uses(path):
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("functai.") and a.name not in PUBLIC_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "functai":
            if node.module not in PUBLIC_MODULES:
                found.append(node.module)
            elif node.module == "functai":
                found += [a.name for a in node.names if a.name not in PUBLIC]
            else:
                found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "functai":
            if node.attr not in PUBLIC:
                found.append(f"functai.{node.attr}")
    return found


def test_the_builtin_distributions_are_these_nine():
    assert {p.parts[-3] for p in SOURCES} == {"approval", "budget", "cache", "compaction", "console", "dbos",
                                              "delegate", "fallback", "otel"}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_builtins_use_only_the_public_api(path):
    assert private_uses(path) == []


def test_the_scan_catches_private_names(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import functai._layers\nfrom functai._hooks import fold\nfrom functai import _x\nfunctai.hooks\n")
    assert private_uses(bad) == ["functai._layers", "functai._hooks", "_x", "functai.hooks"]


class _EntryPoint:
    def __init__(self, name, dist, target):
        self.name, self.value = name, "x:y"
        self.dist = type("Dist", (), {"name": dist, "version": "1.0"})()
        self._target = target

    def load(self):
        return self._target


@pytest.fixture
def entry_points(monkeypatch):
    found = []
    monkeypatch.setattr("functai._hooks.installed.entry_points", lambda group: list(found) if group == builtins.GROUP else [])
    builtins.forget()
    yield found
    builtins.forget()


def test_with_none_installed_the_factory_names_the_distribution(entry_points):
    with pytest.raises(FunctAIError) as info:
        functai.compaction(keep=2)
    assert info.value.code == "builtin-missing" and "functai_builtin_plugins/compaction" in info.value.message
    with pytest.raises(FunctAIError) as info:
        functai.delegate(None)
    assert "functai_builtin_plugins/delegate" in info.value.message


def test_another_distribution_registering_the_name_is_used(entry_points):
    entry_points.append(_EntryPoint("compaction", "my-compaction", lambda **kw: ("mine", kw)))
    assert functai.compaction(keep=3) == ("mine", {"keep": 3})


def test_two_distributions_with_one_name_are_refused(entry_points):
    entry_points.append(_EntryPoint("compaction", "a", object))
    entry_points.append(_EntryPoint("compaction", "b", object))
    with pytest.raises(FunctAIError) as info:
        functai.compaction()
    assert info.value.code == "builtin-ambiguous" and "a, b" in info.value.message
