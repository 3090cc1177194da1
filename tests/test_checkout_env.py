"""The tests' own processes load the plugins this checkout ships and no other installed one: a
plugin installed beside them (the README's example, installed after the suite's first run) changes
nothing the suite sees, however often it runs in one venv."""

from __future__ import annotations

import json
import subprocess
import sys

from checkout import SHIPPED_PLUGINS, shipped_env

LOADED = ("import json; from functai._hooks import installed; "
          "print(json.dumps({i.name: i.state for i in installed.Installed.discover().found}))")


def test_a_plugin_installed_beside_the_checkouts_is_not_loaded_by_the_tests_processes(tmp_path):
    info = tmp_path / "functai_extra-1.0.0.dist-info"  # a real distribution on the path, as pip leaves one
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: functai-extra\nVersion: 1.0.0\n")
    (info / "entry_points.txt").write_text("[functai]\nextra = functai_extra\n")
    (tmp_path / "functai_extra.py").write_text("raise RuntimeError('an extra plugin was loaded')\n")
    path = str(tmp_path)
    plain = subprocess.run([sys.executable, "-c", LOADED], capture_output=True, text=True,
                           env={**shipped_env(PYTHONPATH=path), "FUNCTAI_LOAD_PLUGINS": ""}, timeout=60)
    found = json.loads(plain.stdout)
    assert found["extra"] == "blocked"
    done = subprocess.run([sys.executable, "-c", LOADED], capture_output=True, text=True,
                          env=shipped_env({k: v for k, v in __import__("os").environ.items()
                                           if not k.startswith("FUNCTAI_")}, PYTHONPATH=path), timeout=60)
    found = json.loads(done.stdout)
    assert found["extra"] == "blocked"  # installed, and not loaded
    assert {name for name, state in found.items() if state == "loaded"} == set(SHIPPED_PLUGINS.split(","))
    assert SHIPPED_PLUGINS.split(",") == ["approval", "dbos", "otel"]
