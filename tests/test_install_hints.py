"""Install hints name what works: never a distribution this repository makes but the package index does not have.

functai-approval, functai-compaction, functai-delegate, functai-otel and the
examples are built from this repository only, and the name ``functai`` on the
index belongs to an unrelated project: a hint that says ``pip install NAME``
for one of them sends people to whatever someone registers under that name.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest

import functai
from functai import ai, _builtins as builtins
from functai._errors import FunctAIError
from functai._hooks.installed import incompatible

ROOT = Path(__file__).resolve().parent.parent


def _name(pyproject: Path) -> str:
    found = re.search(r'^name\s*=\s*"([^"]+)"', pyproject.read_text(), re.MULTILINE)
    assert found, pyproject
    return found.group(1)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


#: Every distribution this repository builds (its own pyproject.toml files), functai included.
UNPUBLISHED = frozenset(
    _canonical(_name(p)) for p in [ROOT / "pyproject.toml", *ROOT.glob("functai_builtin_plugins/*/pyproject.toml"),
                                    *ROOT.glob("examples/*/pyproject.toml")]
)

_COMMAND = re.compile(r"\b(?:pip3?|functai) install\b([^`#()\n'|]*)")
#: Words that end a command written in prose ("pip install plugins into functai's environment").
_PROSE = frozenset({"or", "and", "into", "in", "from", "then", "to", "with", "for", "the", "a", "it", "them"})


def unpublished_in(text: str) -> list[str]:
    """The install commands in ``text`` that fetch one of `UNPUBLISHED` from the package index."""
    found = []
    for match in _COMMAND.finditer(text):
        try:
            words = shlex.split(match.group(1))
        except ValueError:
            words = match.group(1).split()
        for word in words:
            if word.lower().strip(",;:") in _PROSE:
                break
            if word.startswith(("-", ".", "/", "~", "{")) or "/" in word:
                continue  # an option, a path, a URL, a placeholder
            name = re.match(r"[A-Za-z0-9_.\-]+", word)
            if name and _canonical(name.group(0)) in UNPUBLISHED:
                found.append(match.group(0).strip())
    return found


def test_the_distributions_are_known() -> None:
    assert {"functai", "functai-approval", "functai-compaction", "functai-delegate", "functai-otel"} <= UNPUBLISHED


def test_the_checker_catches_what_it_is_for() -> None:
    assert unpublished_in("install it: pip install functai-approval (or another)") != []
    assert unpublished_in('needs psycopg: pip install "functai[postgres]"') != []
    assert unpublished_in("functai install -U functai_otel") != []
    assert unpublished_in("functai install ./functai_builtin_plugins/otel; pip install --group dev -e .") == []
    assert unpublished_in('pip install "psycopg[binary]>=3.1" my-compaction') == []


def _texts() -> list[Path]:
    skip = {".venv", ".git", "tests", "node_modules", "build", "dist"}
    found = []
    for top in ("functai", "docs", "functai_builtin_plugins", "examples"):
        for folder, dirs, files in os.walk(ROOT / top):
            dirs[:] = [d for d in dirs if d not in skip and not d.endswith(".egg-info")]
            found += [Path(folder, f) for f in files if f.endswith((".py", ".md", ".toml"))]
    return [ROOT / "README.md", *found]


def test_no_text_in_the_repository_sends_pip_to_the_index_for_an_unpublished_name() -> None:
    texts = _texts()
    assert len(texts) > 50
    wrong = {str(path.relative_to(ROOT)): hits for path in texts if (hits := unpublished_in(path.read_text()))}
    assert wrong == {}


@pytest.fixture
def no_builtins(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("functai._hooks.installed.entry_points", lambda group: [])
    builtins.forget()
    yield
    builtins.forget()


def _works(message: str, folder: str) -> None:
    """The message names the repository folder by a path that exists, and nothing to fetch by name."""
    assert unpublished_in(message) == []
    path = re.search(r"functai install ([^\s,)]+)", message).group(1)
    assert path.endswith(f"functai_builtin_plugins/{folder}") and (Path(path) / "pyproject.toml").is_file()


@pytest.mark.parametrize("name", ["compaction", "delegate"])
def test_a_missing_builtin_names_its_folder_in_this_repository(no_builtins: None, name: str) -> None:
    with pytest.raises(FunctAIError) as info:
        getattr(functai, name)(None)
    assert info.value.code == "builtin-missing"
    _works(info.value.message, name)


def test_a_missing_approval_plugin_names_its_folder_in_this_repository() -> None:
    @ai(approve="all", disable_plugins=["approval"])
    def answer(question: str) -> str:
        """Answer."""

    with pytest.raises(FunctAIError) as info:
        answer("why?")
    assert info.value.code == "approval-missing"
    _works(info.value.message, "approval")


def test_an_outdated_builtin_distribution_is_not_upgraded_from_the_index() -> None:
    dist = SimpleNamespace(name="functai-otel", version="0.1.0", requires=["functai<0.0.1"])
    problem = incompatible(dist)
    assert problem is not None and "supports functai<0.0.1" in problem
    _works(problem, "otel")
    other = incompatible(SimpleNamespace(name="house-style", version="1.0", requires=["functai<0.0.1"]))
    assert other is not None and "pip install -U house-style" in other  # a published plugin is upgraded by name


def test_outside_a_checkout_the_hint_says_where_the_folder_is(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from functai._hooks import shipped

    monkeypatch.setattr(shipped, "__file__", str(tmp_path / "site-packages" / "functai" / "_hooks" / "shipped.py"))
    command = shipped.install_command("functai-approval")
    assert command == "functai install ./functai_builtin_plugins/approval (in a checkout of the functai repository)"
