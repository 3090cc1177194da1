"""The name `functai` on PyPI belongs to an earlier, unrelated project. No install command this
repository gives, and no requirement of a plugin it ships, may resolve to that project: this
functai's versions start above every release it has, and every requirement names that line.

The other project's releases are listed here as the package index showed them
(``pip index versions functai``); add any new one it publishes.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

import functai

ROOT = Path(__file__).resolve().parent.parent

#: The unrelated project's releases on PyPI.
OTHER_PROJECT = ["0.1.2", "0.1.3", "0.6.0", "0.7.0", "0.8.0", "0.8.1", "0.9.0", "0.10.0", "0.11.0", "0.12.0",
                 "1.0.0", "1.0.1", "1.1.0", "1.2.0"]

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


def _distributions() -> list[Path]:
    return sorted([*ROOT.glob("functai_builtin_plugins/*/pyproject.toml"), *ROOT.glob("examples/*/pyproject.toml")])


def _functai_requirements(pyproject: Path) -> list[Requirement]:
    project = tomllib.loads(pyproject.read_text())["project"]
    found = [Requirement(text) for text in project.get("dependencies", [])]
    return [requirement for requirement in found if requirement.name == "functai"]


def test_this_functai_is_above_every_release_of_the_other_project():
    assert Version(functai.__version__) > max(Version(v) for v in OTHER_PROJECT)
    own = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert own == functai.__version__


@pytest.mark.parametrize("pyproject", _distributions(), ids=lambda path: path.parent.name)
def test_no_plugin_here_can_be_given_the_other_project(pyproject):
    [requirement] = _functai_requirements(pyproject)
    assert not [v for v in OTHER_PROJECT if requirement.specifier.contains(v, prereleases=True)], requirement
    assert requirement.specifier.contains(functai.__version__), requirement  # and this functai meets it


def test_the_docs_and_readmes_ask_only_for_this_functai():
    """Every `functai` requirement written in the docs (a pyproject example, a range in the text)."""
    texts = [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("examples/*/README.md")]
    found = []
    for path in texts:
        for match in re.finditer(r"functai(?P<spec>(?:[<>=!~]=?[0-9][0-9.*]*,?)+)", path.read_text()):
            found.append((path.name, match.group("spec").rstrip(",")))
    assert found  # the check reads them
    for name, spec in found:
        requirement = Requirement("functai" + spec)
        if any(op in spec for op in (">=99", "<0.1", ">=9")):  # the docs' examples of a plugin no functai meets
            continue
        assert not [v for v in OTHER_PROJECT if requirement.specifier.contains(v)], (name, spec)


@pytest.mark.venv
def test_a_built_plugin_wheel_requires_only_this_functais_line(tmp_path):
    """The example plugin built as a wheel (as pip builds it): its Requires-Dist cannot be met by
    any release of the other project."""
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path),
                           str(ROOT / "examples" / "functai-plugin-example")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    [wheel] = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        [name] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(archive.read(name).decode())
    [requirement] = [Requirement(r) for r in metadata.get_all("Requires-Dist") if r.startswith("functai")]
    assert not [v for v in OTHER_PROJECT if requirement.specifier.contains(v, prereleases=True)]
    assert requirement.specifier.contains(functai.__version__)
