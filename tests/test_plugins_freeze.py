"""`functai plugins freeze`: the installed plugin distributions written as the lines pip's own freeze
writes for them, read from real ``*.dist-info`` folders (PEP 610 ``direct_url.json`` for what was
installed from a folder, an archive or a VCS), and `functai install -r` refusing what it cannot read.
"""

import io
import json
import os
import subprocess
import sys

import packaging.utils  # noqa: F401  (imported before sys.path leaves site-packages out)
import packaging.version  # noqa: F401
import pytest

from functai._cli import main

#: distribution, version, entry-point groups it registers in, its direct_url.json (None: from an index)
DISTRIBUTIONS = [
    ("functai-from-index", "1.4.0", ["functai"], None),
    ("functai-odd-version", "2024-spring", ["functai"], None),  # not PEP 440: pip pins it with ===
    ("functai-folder", "0.2.0", ["functai.builtins"], {"url": "file:///srv/plugins/folder%20one", "dir_info": {}}),
    ("functai-edited", "0.3.0", ["functai"], {"url": "file:///home/me/edited", "dir_info": {"editable": True}}),
    ("functai-wheel", "1.0.0", ["functai.stores"], {
        "url": "https://example.org/functai_wheel-1.0.0-py3-none-any.whl",
        "archive_info": {"hash": "sha256=" + "ab" * 32, "hashes": {"sha256": "ab" * 32}}}),
    ("functai-archive", "1.1.0", ["functai.providers"], {"url": "file:///tmp/functai-archive-1.1.0.tar.gz",
                                                         "archive_info": {}}),
    ("Functai_Git", "0.9.0", ["functai", "functai.builtins"], {
        "url": "https://example.org/me/functai-git.git", "subdirectory": "plugin",
        "vcs_info": {"vcs": "git", "commit_id": "0123456789abcdef0123456789abcdef01234567",
                     "requested_revision": "main"}}),
    ("functai-command", "0.1.0", ["functai.commands"], None),
    ("not-a-plugin", "3.0.0", ["console_scripts"], None),
]


def _dist_info(folder, name, version, groups, direct):
    info = folder / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("".join(f"[{group}]\n{name.lower()}-{i} = {name.lower()}_mod:x\n"
                                                   for i, group in enumerate(groups)))
    (info / "RECORD").write_text("")
    (info / "INSTALLER").write_text("pip\n")
    if direct is not None:
        (info / "direct_url.json").write_text(json.dumps(direct))


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder of installed distributions, the only one on sys.path besides functai's own."""
    folder = tmp_path / "site"
    folder.mkdir()
    for row in DISTRIBUTIONS:
        _dist_info(folder, *row)
    # a `setup.py develop` install: an .egg-info in the project, an .egg-link where pip looks for one
    project = tmp_path / "develop-project"
    info = project / "functai_develop.egg-info"
    info.mkdir(parents=True)
    (info / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: functai-develop\nVersion: 0.5.0\n")
    (info / "entry_points.txt").write_text("[functai]\ndevelop = functai_develop:x\n")
    (folder / "functai-develop.egg-link").write_text(f"{project}\n.")
    monkeypatch.setattr(sys, "path", [str(folder), str(project), *without_site_packages()])
    return folder, project


def without_site_packages():
    """sys.path less the folders of installed distributions (this checkout's own plugins among them)."""
    return [entry for entry in sys.path if "site-packages" not in entry]


def freeze():
    out = io.StringIO()
    err = io.StringIO()
    assert main(["plugins", "freeze"], out, err) == 0, err.getvalue()
    return out.getvalue().splitlines()


def test_freeze_writes_what_pip_freeze_writes_for_each_plugin_distribution(site):
    folder, project = site
    lines = freeze()
    assert lines[0].startswith("# functai ") and "plugin distributions in" in lines[0]
    assert lines[1] == "# restore them with: functai install -r FILE"
    mine = [line for line in lines if not line.startswith("#")]

    # pip's own freeze of the same folders (its --path reads one folder; the egg-link is found on PYTHONPATH)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(project)])}
    pips = subprocess.run([sys.executable, "-m", "pip", "freeze", "--disable-pip-version-check", "--path", str(folder)],
                          capture_output=True, text=True, env=env, check=True).stdout.splitlines()
    assert "not-a-plugin==3.0.0" in pips and not any("not-a-plugin" in line for line in lines)
    theirs = [line for line in pips if not line.startswith("#") and line != "not-a-plugin==3.0.0"]
    assert len(theirs) == len(DISTRIBUTIONS) and mine == theirs

    assert mine == [  # sorted by lower-cased name, as pip sorts them
        "functai-archive @ file:///tmp/functai-archive-1.1.0.tar.gz",
        "functai-command==0.1.0",
        f"-e {project}",
        "-e /home/me/edited",
        "functai-folder @ file:///srv/plugins/folder%20one",
        "functai-from-index==1.4.0",
        "functai-odd-version===2024-spring",
        "functai-wheel @ https://example.org/functai_wheel-1.0.0-py3-none-any.whl#sha256=" + "ab" * 32,
        "Functai_Git @ git+https://example.org/me/functai-git.git@0123456789abcdef0123456789abcdef01234567"
        "#subdirectory=plugin",
    ]
    # an editable install is named in the comment above it, as pip names it
    assert lines[lines.index("-e /home/me/edited") - 1] == "# Editable install (functai-edited==0.3.0)"
    assert lines[lines.index(f"-e {project}") - 1] == "# Editable install (functai-develop==0.5.0)"


def test_freeze_with_no_plugin_installed_is_the_header_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", [str(tmp_path), *without_site_packages()])
    lines = freeze()
    assert len(lines) == 2 and all(line.startswith("# ") for line in lines)


def test_install_r_refuses_a_file_that_is_not_there_before_running_pip(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    status = main(["install", "-r", str(tmp_path / "plugins.txt")], out, err)
    assert status == 2
    assert "error [not-found]: no requirements file" in err.getvalue() and "functai plugins freeze" in err.getvalue()


@pytest.mark.parametrize("direct", [
    {"url": "https://example.org/p.whl\n--index-url https://evil.example/simple", "archive_info": {}},
    {"url": "https://example.org/p.whl%0A--index-url%20https://evil.example/simple", "archive_info": {}},
    {"url": "file:///srv/p%0A--extra-index-url%20https://evil.example", "dir_info": {"editable": True}},
    {"url": "--index-url=https://evil.example/simple", "dir_info": {}},
    {"url": "https://example.org/p.git", "vcs_info": {"vcs": "git", "commit_id": "abc\r\n-i https://evil.example"}},
    {"url": "https://example.org/p.tar.gz", "archive_info": {"hash": "sha256=ab --index-url https://evil.example"}},
    {"url": "https://example.org/p.git", "subdirectory": "plugin\n-i https://evil.example",
     "vcs_info": {"vcs": "git", "commit_id": "0123456789abcdef"}},
    {"url": "file:///tmp/x%E2%80%A8--index-url%20https://evil.example/simple", "dir_info": {"editable": True}},
    {"url": "file:///tmp/x%C2%85--index-url%20https://evil.example/simple", "dir_info": {"editable": True}},
], ids=["newline", "quoted-newline", "editable-quoted-newline", "leading-dash", "vcs-commit", "hash-space",
        "subdirectory", "line-separator", "next-line"])
def test_freeze_refuses_a_recorded_value_that_could_add_a_line_and_writes_nothing(tmp_path, monkeypatch, direct):
    folder = tmp_path / "site"
    folder.mkdir()
    _dist_info(folder, "functai-fine", "1.0.0", ["functai"], None)
    _dist_info(folder, "functai-crafted", "1.0.0", ["functai"], direct)
    monkeypatch.setattr(sys, "path", [str(folder), *without_site_packages()])
    out, err = io.StringIO(), io.StringIO()
    assert main(["plugins", "freeze"], out, err) == 2
    assert out.getvalue() == ""  # not a line: not even the fine distribution's
    assert "error [freeze-unsafe]" in err.getvalue() and "'functai-crafted'" in err.getvalue()
    assert "\n--index-url" not in err.getvalue() and "\n-i " not in err.getvalue()
