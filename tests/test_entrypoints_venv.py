"""Entry points read from the dist-info folders equal importlib_metadata's, in a real venv.

One fresh venv (made once for this module) holds everything discovery must
agree on: 20 pip-installed plugin distributions (wheels; groups ``functai``,
``functai.builtins``, ``functai.stores``, a ``Requires-Dist``), a modern
editable install (setuptools puts a finder of its own on ``sys.meta_path``),
a legacy ``.egg-link`` / ``easy-install.pth`` develop install (an
``.egg-info`` with ``requires.txt`` sections), a folder added by a ``.pth``
file, a ``PYTHONPATH`` folder listed twice whose copies shadow site-packages
(one spelled ``FUNCTAI.PLUG__6``, one stale folder without metadata, which
loses to the installed one), and a ``*.dist-info`` in the working directory
(the ``""`` entry of ``python -c``). The reader is loaded from its file, so
the venv needs no functai; it is compared with the backport that functai
falls back to on this Python.
"""

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import zipfile

import pytest

from test_installed_venv import package, pip

pytestmark = pytest.mark.venv  # slow: `python -m pytest -m "not venv"` leaves these out

ROOT = pathlib.Path(__file__).resolve().parent.parent
READER = ROOT / "functai" / "_hooks" / "entrypoints.py"
GROUPS = ("functai", "functai.builtins", "functai.stores")

PROBE = textwrap.dedent('''
    import importlib.util, json, os, sys
    spec = importlib.util.spec_from_file_location("reader", os.environ["READER"])
    reader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reader)
    if os.environ.get("CUSTOM_FINDER"):  # a distribution finder of its own, as a .pth or an app may add
        import pathlib
        import importlib_metadata as m

        class Finder(m.DistributionFinder):
            def find_spec(self, *args):
                return None

            def find_distributions(self, context=m.DistributionFinder.Context()):
                found = m.PathDistribution(pathlib.Path(os.environ["CUSTOM_FINDER"]))
                return [found] if context.name in (None, "custom_plug") else []

        sys.meta_path.append(Finder())
    import importlib_metadata as theirs

    def fact(dist, name):
        try:
            return getattr(dist, name)
        except theirs.MetadataNotFound:  # a folder without metadata: the reader says None
            return None

    def facts(eps):
        return [[ep.name, ep.value, ep.group, *(fact(ep.dist, name) for name in ("name", "version", "requires"))]
                for ep in eps]

    def their_version(top):
        for name in dict.fromkeys(theirs.packages_distributions().get(top) or []):
            return theirs.version(name)

    out = {"fast": reader.distributions() is not None, "groups": {},
           "finders": [(f if isinstance(f, type) else type(f)).__name__ for f in sys.meta_path]}
    for group in sys.argv[1].split(","):
        mine = reader.entry_points(group)
        out["groups"][group] = {
            "mine": facts(mine),
            # importlib's own order, stably sorted by name as functai's discovery sorts
            "theirs": facts(sorted(theirs.entry_points(group=group), key=lambda ep: ep.name)),
        }
    tops = sys.argv[2].split(",") if len(sys.argv) > 2 else []
    out["versions"] = {top: [reader.package_version(top), their_version(top)] for top in tops}
    out["loaded"] = repr(next(ep for ep in reader.entry_points("functai") if ep.name == "plug-3").load())
    print(json.dumps(out))
''')


def _wheel(where, i, entries=None, requires=(), version="1.2.3"):
    """A wheel of one plugin module, written directly (pip installs it as any wheel; no build backend to wait for)."""
    dist, module = f"functai-plug-{i}", f"functai_plug_{i}"
    info = f"{module}-{version}.dist-info"
    groups = "".join(f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in items.items()) + "\n"
                     for group, items in (entries or {"functai": {f"plug-{i}": f"{module}:NAME"}}).items())
    files = {
        f"{module}.py": f"NAME = 'plug {i}'\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
                            + "".join(f"Requires-Dist: {r}\n" for r in requires) + "\nA plugin.\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": groups,
        f"{info}/top_level.txt": f"{module}\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    path = where / f"{module}-{version}-py3-none-any.whl"
    where.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return str(path)


def _plugin(where, i, entries=None, extra="", version="1.2.3"):
    folder = where / f"d{i}-{version}"
    folder.mkdir(parents=True)
    path = package(folder, f"functai-plug-{i}", f"NAME = 'plug {i}'\n",
                   entries or {"functai": {f"plug-{i}": f"functai_plug_{i}:NAME"}})
    project = pathlib.Path(path) / "pyproject.toml"
    project.write_text(project.read_text().replace('version = "1.2.3"', f'version = "{version}"\n{extra}'))
    return path


def _editable_project(where):
    """A package (flat layout): setuptools' editable install imports it through a finder of its own."""
    folder = where / "editable"
    (folder / "functai_edited").mkdir(parents=True)
    (folder / "functai_edited" / "__init__.py").write_text("NAME = 'edited'\n")
    (folder / "pyproject.toml").write_text(textwrap.dedent("""
        [build-system]
        requires = ["setuptools>=64"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "functai-edited"
        version = "0.4.0"
        dependencies = ["functai>=0.1"]

        [tool.setuptools]
        packages = ["functai_edited"]

        [project.entry-points.functai]
        edited = "functai_edited:NAME"
    """))
    return str(folder)


def _develop_install(python, site, where):
    """The layout ``setup.py develop`` left: an .egg-info in the project, an .egg-link, easy-install.pth.

    The .egg-info is written by setuptools' own ``egg_info`` command; its
    PKG-INFO loses its Requires-Dist lines, as older setuptools wrote it, so
    requirements come from requires.txt's ``[extra:marker]`` sections.
    """
    folder = pathlib.Path(_plugin(where, 22, {"functai": {"linked": "functai_plug_22:NAME"}},
                                  extra='dependencies = ["functai>=0.1,<9", "attrs; python_version >= \'3\'"]\n'
                                        '[project.optional-dependencies]\nx = ["pluggy @ https://example.org/p.zip"]\n'
                                        'y = ["httpx; os_name == \'posix\'"]'))
    (folder / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    subprocess.run([str(python), "setup.py", "-q", "egg_info"], cwd=folder, check=True, capture_output=True)
    info = folder / "functai_plug_22.egg-info"
    pkg_info = info / "PKG-INFO"
    pkg_info.write_text("".join(line for line in pkg_info.read_text().splitlines(keepends=True)
                                if not line.startswith(("Requires-Dist:", "Provides-Extra:"))))
    assert "[x]" in (info / "requires.txt").read_text()
    (site / "functai-plug-22.egg-link").write_text(f"{folder}\n.")
    (site / "easy-install.pth").write_text(f"{folder}\n")


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("eps")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([*pip(python, "install"), "setuptools>=64", "wheel", "importlib_metadata>=8.7"], check=True)
    site = pathlib.Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                       capture_output=True, text=True, check=True).stdout.strip())
    made = tmp / "made"
    wheels = [_wheel(made, i) for i in range(20)]
    wheels[1] = _wheel(made, 1, requires=["functai>=0.1", 'packaging>=20; extra == "x"'], version="2.0")
    wheels[2] = _wheel(made, 2, {"functai": {"plug-2": "functai_plug_2:NAME"},
                                 "functai.builtins": {"aside": "functai_plug_2:NAME"}}, version="2.1")
    wheels[3] = _wheel(made, 3, {"functai": {"plug-3": "functai_plug_3:NAME"},
                                 "functai.stores": {"plugstore": "functai_plug_3:NAME"}}, version="2.2")
    subprocess.run([*pip(python, "install", "--no-deps"), *wheels], check=True)
    subprocess.run([*pip(python, "install", "--no-build-isolation"), "-e", _editable_project(made)], check=True)
    _develop_install(python, site, made)

    # A folder added by a .pth file: one new distribution, one that site-packages shadows.
    extra = tmp / "extra"
    subprocess.run([*pip(python, "install", "--no-deps"), "--target", str(extra), _wheel(made / "x", 21),
                    _wheel(made / "x", 5, {"functai": {"shadow": "functai_plug_5:NAME"}}, version="9.0")], check=True)
    (site / "extra-plugins.pth").write_text(f"{extra}\n")

    # A PYTHONPATH folder (listed twice): its plug-7 shadows site-packages'; FUNCTAI.PLUG__6 (one name
    # spelled otherwise) too; a stale plug-8 folder without metadata loses to the installed one;
    # "ghost", without metadata but the only one of its name, still counts (after those with metadata).
    front = tmp / "front"
    subprocess.run([*pip(python, "install", "--no-deps"), "--target", str(front),
                    _wheel(made / "f", 7, {"functai": {"plug-7-front": "functai_plug_7:NAME"}}, version="3.0"),
                    _wheel(made / "f", 6, {"functai": {"plug-6-front": "functai_plug_6:NAME"}}, version="3.0")],
                   check=True)
    (front / "functai_plug_6-3.0.dist-info").rename(front / "FUNCTAI.PLUG__6-3.0.dist-info")
    for stale, entry in (("functai_plug_8-0.1.dist-info", "stale"), ("ghost-0.1.dist-info", "ghost")):
        (front / stale).mkdir()
        (front / stale / "entry_points.txt").write_text(f"[functai]\n{entry} = functai_plug_8:NAME\n")

    # The working directory of `python -c` (sys.path's "" entry).
    cwd = tmp / "cwd"
    (cwd / "cwdplug-1.0.dist-info").mkdir(parents=True)
    (cwd / "cwdplug-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: cwdplug\nVersion: 1.0\n")
    (cwd / "cwdplug-1.0.dist-info" / "entry_points.txt").write_text(
        "# a comment\n[functai]\ncwd = functai_plug_9:NAME\n\n[functai.stores]\ncwdstore=x:y\n")
    return python, tmp, f"{front}{os.pathsep}{front}"


def _probe(python, tmp, *args, **env):
    done = subprocess.run([str(python), "-c", PROBE, *args], capture_output=True, text=True, cwd=tmp / "cwd",
                          env={**os.environ, "READER": str(READER), **env})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_entry_points_read_from_folders_equal_importlib_metadatas(venv):
    python, tmp, front = venv
    tops = "functai_plug_3,functai_plug_7,functai_plug_21,functai_edited,functai_plug_22,importlib_metadata,nothing"
    out = _probe(python, tmp, ",".join(GROUPS), tops, PYTHONPATH=front)
    assert out["fast"], "folders only: no fallback to importlib.metadata expected"
    assert any("Editable" in name for name in out["finders"]), out["finders"]  # the editable install's finder
    for group in GROUPS:
        assert out["groups"][group]["mine"] == out["groups"][group]["theirs"], group
    mine = {row[0]: row for row in out["groups"]["functai"]["mine"]}
    assert {f"plug-{i}" for i in (0, 1, 2, 3, 4, 5, 8, 9, 10, 19, 21)} | {"edited", "linked", "cwd", "ghost"} <= set(mine)
    assert {"plug-7-front", "plug-6-front"} <= set(mine) and not {"plug-7", "plug-6", "shadow", "stale"} & set(mine)
    assert mine["plug-1"][3:] == ["functai-plug-1", "2.0", ["functai>=0.1", "packaging>=20; extra == \"x\""]]
    assert mine["linked"][5] == ["functai<9,>=0.1", 'attrs; python_version >= "3"',
                                 'pluggy@ https://example.org/p.zip ; extra == "x"',
                                 'httpx; (os_name == "posix") and extra == "y"']
    assert mine["edited"][3:5] == ["functai-edited", "0.4.0"]
    assert [row[0] for row in out["groups"]["functai.stores"]["mine"]] == ["cwdstore", "plugstore"]
    assert out["groups"]["functai.builtins"]["mine"][0][:2] == ["aside", "functai_plug_2:NAME"]
    for top, (mine_version, their_version) in out["versions"].items():
        assert mine_version == their_version, top
    assert out["versions"]["functai_plug_7"][0] == "3.0" and out["versions"]["nothing"][0] is None
    assert out["loaded"] == "'plug 3'"


def test_what_folders_cannot_show_is_asked_of_importlib_metadata(venv):
    python, tmp, front = venv
    # A zip on sys.path: importlib.metadata reads inside it.
    zipped = tmp / "zipped.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("zipped_plug-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: zipped-plug\nVersion: 1.0\n")
        archive.writestr("zipped_plug-1.0.dist-info/entry_points.txt", "[functai]\nzipped = zipped_plug:x\n")
    out = _probe(python, tmp, "functai", PYTHONPATH=str(zipped))
    assert not out["fast"] and out["groups"]["functai"]["mine"] == out["groups"]["functai"]["theirs"]
    assert "zipped" in [row[0] for row in out["groups"]["functai"]["mine"]]

    # A sys.meta_path finder of its own that finds distributions (not a folder on sys.path).
    custom = tmp / "custom" / "custom_plug-1.0.dist-info"
    custom.mkdir(parents=True, exist_ok=True)
    (custom / "METADATA").write_text("Metadata-Version: 2.1\nName: custom-plug\nVersion: 1.0\n")
    (custom / "entry_points.txt").write_text("[functai]\ncustom = custom_plug:x\n")
    out = _probe(python, tmp, "functai", CUSTOM_FINDER=str(custom))
    assert not out["fast"] and out["groups"]["functai"]["mine"] == out["groups"]["functai"]["theirs"]
    assert "custom" in [row[0] for row in out["groups"]["functai"]["mine"]]

