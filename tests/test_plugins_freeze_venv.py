"""Freeze → uninstall all → `functai install -r` → the same plugin set, in a throw-away venv with real pip.

The plugins are installed every way pip installs: by name from a package index (a local find-links
folder), from a folder, editable, from a wheel file and from a git repository; each line of the
freeze must be the line pip's own freeze writes for it.
"""

import os
import pathlib
import subprocess
import sys
import textwrap
import zipfile

import pytest

from test_installed_venv import package, pip

from functai import __version__ as functai_version

pytestmark = pytest.mark.venv  # slow: `python -m pytest -m "not venv"` leaves these out


HOOKS = '''
import functai

@functai.hookimpl
def before_call(call):
    return None
'''

#: distribution → (module source, entry points), each installed its own way (see `plugins`)
PLUGINS = {
    "functai-frz-index": (HOOKS, {"functai": {"frz-index": "functai_frz_index"}}),
    "functai-frz-folder": ("def factory(**options):\n    return options\n",
                           {"functai.builtins": {"frz-folder": "functai_frz_folder:factory"}}),
    "functai-frz-edit": ("def open_store(url):\n    raise NotImplementedError\n",
                         {"functai.stores": {"frzedit": "functai_frz_edit:open_store"}}),
    "functai-frz-wheel": (HOOKS, {"functai": {"frz-wheel": "functai_frz_wheel"}}),
    "functai-frz-git": ('''
        import functai

        @functai.providerimpl
        def functai_client(provider, model, settings):
            return None
    ''', {"functai.providers": {"frz-git": "functai_frz_git"}}),
}


def functai(python, *args, **env):
    """The venv's own `functai` console script."""
    return subprocess.run([str(python.parent / "functai"), *args], capture_output=True, text=True, cwd="/",
                          env={**{k: v for k, v in os.environ.items() if not k.startswith("FUNCTAI_")}, **env})


def requirement_lines(text):
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def build_wheel(python, folder, into):
    subprocess.run([*pip(python, "wheel", "--no-deps", "--no-build-isolation"), "-w", str(into), folder], check=True)
    [made] = into.glob(pathlib.Path(folder).name.replace("-", "_") + "-*.whl")
    return str(made)


@pytest.fixture(scope="module")
def venv(tmp_path_factory, source_copy):
    path = tmp_path_factory.mktemp("freeze") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    python = path / "bin" / "python"
    # pip >= 24.1 installs the line its freeze writes for a git+file:// URL (older pips' packaging refuses it)
    subprocess.run([*pip(python, "install"), "pip>=24.1", "setuptools>=64", "wheel"], check=True)
    subprocess.run([*pip(python, "install"), str(source_copy)], check=True)
    return python


@pytest.fixture(scope="module")
def plugins(venv, tmp_path_factory):
    """The five plugin distributions installed: their folders, the wheel file, pip's environment with the
    find-links folder the index one came from, and the git commit."""
    made = tmp_path_factory.mktemp("made")
    folders = {name: package(made, name, source, entries) for name, (source, entries) in PLUGINS.items()}
    links = made / "links"
    build_wheel(venv, folders["functai-frz-index"], links)
    wheel = build_wheel(venv, folders["functai-frz-wheel"], made / "wheels")

    repo = pathlib.Path(folders["functai-frz-git"])
    git = ["git", "-C", str(repo), "-c", "user.name=test", "-c", "user.email=test@example.org"]
    for step in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "a plugin"]):
        subprocess.run([*git, *step], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()

    index = {**os.environ, "PIP_FIND_LINKS": f"{os.environ.get('PIP_FIND_LINKS', '')} {links}".strip()}
    subprocess.run([*pip(venv, "install", "--no-build-isolation"), "functai-frz-index", folders["functai-frz-folder"],
                    "-e", folders["functai-frz-edit"], wheel, f"git+{repo.as_uri()}@{commit}"], check=True, env=index)
    # a distribution that is no plugin: freeze leaves it out, and restoring does not touch it
    subprocess.run([*pip(venv, "install", "--no-build-isolation"),
                    package(made, "not-a-plugin", "X = 1\n", {"console_scripts": {"not-a-plugin": "not_a_plugin:X"}})],
                   check=True)
    return folders, wheel, index, commit


def test_freeze_uninstall_all_and_install_r_gives_back_the_same_set(venv, plugins, tmp_path):
    folders, wheel, index, commit = plugins
    frozen = functai(venv, "plugins", "freeze")
    assert frozen.returncode == 0, frozen.stderr
    lines = requirement_lines(frozen.stdout)
    assert lines == [
        f"-e {folders['functai-frz-edit']}",
        f"functai-frz-folder @ {pathlib.Path(folders['functai-frz-folder']).as_uri()}",
        f"functai-frz-git @ git+{pathlib.Path(folders['functai-frz-git']).as_uri()}@{commit}",
        "functai-frz-index==1.2.3",
        lines[-1],  # its hash, if pip recorded one, follows the file's URL
    ]
    assert lines[-1].split("#")[0] == f"functai-frz-wheel @ {pathlib.Path(wheel).as_uri()}"
    # each is the line pip's own freeze writes (pip names an editable folder in a comment of its own)
    pips = subprocess.run([*pip(venv, "freeze")], capture_output=True, text=True, check=True).stdout.splitlines()
    assert set(lines) <= set(pips)
    assert any(line.startswith("not-a-plugin @ file://") for line in pips) and "not-a-plugin" not in frozen.stdout

    saved = tmp_path / "plugins.txt"
    saved.write_text(frozen.stdout)
    done = functai(venv, "uninstall", "-y", *PLUGINS)
    assert done.returncode == 0, done.stderr
    assert requirement_lines(functai(venv, "plugins", "freeze").stdout) == []

    done = functai(venv, "install", "-r", str(saved), **{"PIP_FIND_LINKS": index["PIP_FIND_LINKS"]})
    assert done.returncode == 0, done.stderr
    assert f"installed into {venv.parent.parent}" in done.stdout
    table = done.stdout[done.stdout.index("installed plugins"):]
    assert "frz-index" in table and "frz-wheel" in table and "frz-folder" in table
    assert functai(venv, "plugins", "freeze").stdout == frozen.stdout  # the same set, written the same way

    checked = functai(venv, "plugins", "doctor")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    statuses = {line.split()[2]: line.split()[0] for line in checked.stdout.splitlines()[1:-1]}
    assert set(statuses) == {"frz-index", "frz-wheel", "frz-folder", "frzedit", "frz-git"}
    assert set(statuses.values()) <= {"ok", "slow"}  # slow or not depends on the machine; broken would not


def _wheel_of_an_old_functai(into):
    """A functai 0.0.5 on the index: what pip would take to satisfy a plugin made for it."""
    into.mkdir(parents=True, exist_ok=True)
    info = "functai-0.0.5.dist-info"
    files = {"functai_old_marker.py": "",
             f"{info}/METADATA": "Metadata-Version: 2.1\nName: functai\nVersion: 0.0.5\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(into / "functai-0.0.5-py3-none-any.whl", "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)


def test_install_r_never_replaces_functai_itself(venv, tmp_path):
    """A plugin frozen for an older functai: pip would take functai back to it; install -r refuses instead."""
    links = tmp_path / "links"
    _wheel_of_an_old_functai(links)
    folder = package(tmp_path, "functai-frz-old", HOOKS, {"functai": {"frz-old": "functai_frz_old"}})
    project = pathlib.Path(folder) / "pyproject.toml"
    project.write_text(project.read_text().replace('version = "1.2.3"', 'version = "1.2.3"\n'
                                                   'dependencies = ["functai<0.1"]'))
    build_wheel(venv, folder, links)
    saved = tmp_path / "plugins.txt"
    saved.write_text(textwrap.dedent("""
        # functai plugins freeze, from before functai was upgraded
        functai-frz-old==1.2.3
    """))
    version = [str(venv), "-c", "import importlib.metadata as m; print(m.version('functai'))"]
    assert subprocess.run(version, capture_output=True, text=True, check=True).stdout.strip() == functai_version

    done = functai(venv, "install", "-r", str(saved), PIP_FIND_LINKS=str(links))
    assert done.returncode == 1 and "functai: error [pip-failed]" in done.stderr
    assert subprocess.run(version, capture_output=True, text=True, check=True).stdout.strip() == functai_version
    assert "frz-old" not in functai(venv, "plugins").stdout
