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


# -- what functai survived is logged, once, and never raised --------------------------------------

SURVIVED = textwrap.dedent('''
    import logging, sys, warnings
    {setup}
    import functai
    from functai import Plugin, ai
    from functai.testing import ScriptedLM

    @ai
    def answer(question: str) -> str:
        """Answer."""

    def deaf(call):
        raise RuntimeError("this listener is broken")

    functai.configure(client=ScriptedLM(["yes", "again"]), plugins=[Plugin("ear", call_end=deaf)])
    assert answer("q") == "yes"  # a hearing hook that fails is heard past
    folder = sys.argv[1]
    with open(folder + "/calls.jsonl", "w") as log:
        log.write("not json\\n")
    assert list(functai.read_calls(folder)) == []  # a damaged call log line is skipped
    print("done")
''')


def _survive(tmp_path: pathlib.Path, setup: str, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("FUNCTAI_")}
    env["FUNCTAI_LOAD_PLUGINS"] = ""
    return subprocess.run([sys.executable, *flags, "-c", SURVIVED.format(setup=setup), str(tmp_path)],
                          capture_output=True, text=True, env=env, cwd=tmp_path)


def test_what_functai_survives_is_silent_by_default_and_never_raised_under_w_error(tmp_path):
    done = _survive(tmp_path, "", "-W", "error")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done" and done.stderr == ""  # a library says nothing until asked


def test_an_application_that_configured_logging_gets_each_event_once(tmp_path):
    done = _survive(tmp_path, "logging.basicConfig(level=logging.WARNING, format='%(name)s %(message)s')",
                    "-W", "error")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    [failed] = [line for line in lines if "hook failed" in line]
    assert failed.startswith("functai hook failed: plugin=ear version=0.0.0 hook=call_end error=RuntimeError: this "
                             "listener is broken")
    assert sum("log line skipped" in line and "reason=not JSON" in line for line in lines) == 1
    assert "Warning" not in done.stderr


def test_with_structlog_configured_an_event_goes_there_and_nowhere_else(tmp_path):
    setup = textwrap.dedent('''
        import atexit, structlog
        seen = []
        def keep(logger, method, event):
            seen.append((method, event["event"]))
            raise structlog.DropEvent
        structlog.configure(processors=[keep])
        logging.basicConfig(level=logging.DEBUG)  # the standard library would show a second copy
        atexit.register(lambda: print("events:", seen))
    ''')
    done = _survive(tmp_path, setup, "-W", "error")
    assert done.returncode == 0, done.stderr
    assert "('warning', 'hook failed')" in done.stdout and "('warning', 'log line skipped')" in done.stdout
    assert "hook failed" not in done.stderr


def test_each_retry_and_fallback_is_logged_with_its_reason():
    from loopback import LoopbackServer, Scripted, completion, error_body

    import functai
    from functai import Change, Plugin, ai, tool
    from functai._models.openai import OpenAIClient
    from functai._models.request import Request
    from functai.testing import ScriptedLM, log_events, tool_call

    with LoopbackServer() as server, log_events() as logged:
        server.script(Scripted(status=503, body=error_body("busy", "server_error")), Scripted(body=completion("ok")))
        with OpenAIClient(base_url=server.url, api_key="sk-never-logged-0123456789", sleep=lambda s: None) as client:
            assert client.complete(Request(model="m", messages=[{"role": "user", "content": "hi"}])).text == "ok"
    [retried] = logged.named("model request retried")
    assert "attempt=2 of=3" in retried and "reason=HTTP 503" in retried and "sk-never" not in retried

    @ai
    def answer(question: str) -> str:
        """Answer."""

    def again(failure):
        return Change(retry=0, note="once more")

    def switch(failure):
        return Change(lm="other", note="the other model")

    for handler, said in ((again, r"model request retried: plugin=again .*error=model-refused .*note=once more"),
                          (switch, r"model switched: plugin=switch .*error=model-refused to=other")):
        lm = ScriptedLM([functai.ModelError("no", code="model-refused"), "fine"])
        with functai.settings(client=lm, plugins=[Plugin(handler.__name__, model_error=handler)]), \
                log_events() as logged:
            assert answer("q") == "fine"
        assert len(logged.named(said)) == 1, logged.messages

    runs = []

    @tool(effects="reads")  # a tool that only reads may be run again
    def flaky(order: str) -> str:
        """Look an order up."""
        runs.append(order)
        if len(runs) == 1:
            raise RuntimeError("the database blinked")
        return "found"

    @ai(tools=[flaky])
    def support(question: str) -> str:
        """Help."""

    lm = ScriptedLM([tool_call("flaky", {"order": "A1"}), "done"])
    with functai.settings(client=lm, plugins=[Plugin("patient", tool_error=lambda failure: Change(retry=0))]), \
            log_events() as logged:
        assert support("q") == "done"
    [retried] = logged.named("tool retried")
    assert "tool=flaky" in retried and "attempt=2" in retried and "the database blinked" in retried
