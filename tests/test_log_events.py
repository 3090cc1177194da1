"""Log events never import structlog: only an application that imported and
configured it gets them through structlog (importing it costs ~40 ms)."""

import os
import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parent.parent

CALL = textwrap.dedent('''
    import sys
    {before}
    import functai
    from functai import ai
    from functai.testing import ScriptedLM

    @ai
    def answer(question: str) -> str:
        """Answer."""

    functai.configure(client=ScriptedLM(["yes"]))
    assert answer("q") == "yes"
    from functai._hooks.installed import installed
    print("loaded:", ",".join(item.name for item in installed().found if item.state == "loaded"))
    print("structlog imported:", "structlog" in sys.modules)
''')

CONFIGURED = textwrap.dedent('''
    import structlog
    seen = []
    def keep(logger, method, event):
        seen.append((method, event["event"], event.get("plugin")))
        raise structlog.DropEvent
    structlog.configure(processors=[keep])
    import atexit
    atexit.register(lambda: print("events:", [s for s in seen if s[1] == "plugin loaded"]))
''')


def _plugin_on_path(folder: pathlib.Path) -> None:
    """A distribution found through sys.path: a module and its .dist-info with one entry point."""
    (folder / "quiet_plugin.py").write_text("from functai import Plugin\nplugin = Plugin('quiet')\n")
    info = folder / "quiet_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: quiet-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[functai]\nquiet = quiet_plugin:plugin\n")


def _run(tmp_path: pathlib.Path, before: str) -> str:
    _plugin_on_path(tmp_path)
    env = {key: value for key, value in os.environ.items() if not key.startswith("FUNCTAI_")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), *sys.path])
    done = subprocess.run([sys.executable, "-c", CALL.format(before=before)],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_first_call_that_discovers_plugins_does_not_import_structlog(tmp_path):
    out = _run(tmp_path, "")
    assert "quiet" in out.split("loaded:")[1].splitlines()[0].split(",")
    assert "structlog imported: False" in out


def test_an_application_that_configured_structlog_still_gets_the_event(tmp_path):
    out = _run(tmp_path, CONFIGURED)
    assert "structlog imported: True" in out
    assert "('info', 'plugin loaded', 'quiet')" in out
