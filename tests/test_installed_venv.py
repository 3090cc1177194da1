"""Installed plugins for real: pip installs into a fresh venv, entry points found by functai.

Slow (a venv and real pip installs), so the venv is made once per session.
"""

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
from test_cli_plugins import uninstall_at_a_terminal

from functai import __version__ as functai_version

pytestmark = pytest.mark.venv  # slow: `python -m pytest -m "not venv"` leaves these out

ROOT = pathlib.Path(__file__).resolve().parent.parent

PROGRAM = textwrap.dedent('''
    import functai
    from functai import ai, tool
    from functai.testing import ScriptedLM, tool_call

    @tool(effects="changes")
    def refund(order: str) -> str:
        """Refund an order."""
        return "refunded"

    @ai(tools=[refund])
    def answer(question: str) -> str:
        """Answer."""

    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"}), "done"]), approve="changes")
    try:
        answer("refund A1")
    except functai.FunctAIError as error:
        print(error.code, "|", error.message)
''')


BUILTINS = ("approval", "compaction", "delegate")


@pytest.fixture(scope="session")
def venv(tmp_path_factory, source_copy):
    path = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    python = path / "bin" / "python"
    subprocess.run([*pip(python, "install"), "setuptools>=77", "wheel"], check=True)  # SPDX license expressions
    builtins = [str(source_copy / "functai_builtin_plugins" / name) for name in BUILTINS]
    subprocess.run([*pip(python, "install"), str(source_copy), *builtins], check=True)
    return python


def pip(python, *args):
    return [str(python), "-m", "pip", *args, "-q", "--disable-pip-version-check"]


def package(tmp_path, distribution, module_source, entry_points):
    """A real pip-installable distribution in a folder: one module and its entry points."""
    module = distribution.replace("-", "_")
    folder = tmp_path / distribution
    folder.mkdir()
    (folder / f"{module}.py").write_text(textwrap.dedent(module_source))
    groups = "".join(
        f'[project.entry-points."{group}"]\n' + "".join(f'{name} = "{target}"\n' for name, target in items.items())
        for group, items in entry_points.items()
    )
    (folder / "pyproject.toml").write_text(textwrap.dedent(f"""
        [build-system]
        requires = ["setuptools>=64"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "{distribution}"
        version = "1.2.3"

        [tool.setuptools]
        py-modules = ["{module}"]
    """) + groups)
    return str(folder)


def install(python, *folders):
    subprocess.run([*pip(python, "install", "--no-build-isolation"), *folders], check=True)


def uninstall(python, *distributions):
    subprocess.run([*pip(python, "uninstall", "-y"), *distributions], check=True)


def run(python, code, **env):
    result = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, cwd="/",
        env={**{k: v for k, v in os.environ.items() if not k.startswith("FUNCTAI_")}, **env},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_installed_approval_is_found_and_uninstalling_it_makes_approve_refuse(venv, source_copy):
    assert run(venv, PROGRAM).startswith("approval-required |")
    assert run(venv, PROGRAM, FUNCTAI_DISABLE_PLUGINS="approval").startswith("approval-missing |")
    assert run(venv, PROGRAM, FUNCTAI_LOAD_PLUGINS="").startswith("approval-missing |")
    uninstall(venv, "functai-approval")
    try:
        out = run(venv, PROGRAM)
        assert out.startswith("approval-missing |") and "functai install ./functai_builtin_plugins/approval (in a" in out
    finally:
        install(venv, str(source_copy / "functai_builtin_plugins" / "approval"))
    assert run(venv, PROGRAM).startswith("approval-required |")


SHOW_SYSTEM = textwrap.dedent('''
    import functai
    from functai.testing import ScriptedLM

    @functai.ai
    def answer(question: str) -> str:
        """Answer."""

    lm = ScriptedLM(["ok"])
    functai.configure(client=lm)
    try:
        value, record = answer.run("q")
        print(repr(lm.requests[0].messages[0]["content"]), [(c["plugin"], c["version"]) for c in record.changes])
    except functai.FunctAIError as error:
        print(error.code, "|", error.message)
''')


def test_an_installed_third_party_plugin_applies_and_can_be_turned_off(venv, tmp_path):
    install(venv, package(tmp_path, "functai-shout", '''
        import functai

        @functai.hookimpl
        def before_call(call):
            return functai.Change(sections=["SHOUT."])
    ''', {"functai": {"shout": "functai_shout"}}))
    try:
        assert run(venv, SHOW_SYSTEM) == "'Answer.\\n\\nSHOUT.' [('shout', '1.2.3')]"
        assert run(venv, SHOW_SYSTEM, FUNCTAI_DISABLE_PLUGINS="shout") == "'Answer.' []"
        assert run(venv, SHOW_SYSTEM, FUNCTAI_LOAD_PLUGINS="") == "'Answer.' []"
        assert run(venv, SHOW_SYSTEM, FUNCTAI_LOAD_PLUGINS="approval,shout").endswith("[('shout', '1.2.3')]")
        assert run(venv, SHOW_SYSTEM.replace("functai.configure(client=lm)",
                                             "functai.configure(client=lm, disable_plugins=['shout'])")) == "'Answer.' []"
    finally:
        uninstall(venv, "functai-shout")


def test_a_broken_plugin_fails_closed_and_functai_plugins_still_works(venv, tmp_path):
    install(venv, package(tmp_path, "functai-broken", '''
        import a_module_that_does_not_exist
    ''', {"functai": {"broken": "functai_broken"}}))
    try:
        out = run(venv, SHOW_SYSTEM)
        assert out.startswith("plugin-load |")
        assert "functai-broken" in out and "'broken'" in out and "FUNCTAI_DISABLE_PLUGINS=broken" in out
        listing = subprocess.run([str(venv.parent / "functai"), "plugins"], capture_output=True, text=True,
                                 env={k: v for k, v in os.environ.items() if not k.startswith("FUNCTAI_")})
        assert listing.returncode == 0, listing.stderr
        assert "broken" in listing.stdout and "failed" in listing.stdout and "approval" in listing.stdout
        assert run(venv, SHOW_SYSTEM, FUNCTAI_DISABLE_PLUGINS="broken") == "'Answer.' []"
    finally:
        uninstall(venv, "functai-broken")


COMPACTION = textwrap.dedent('''
    import functai
    try:
        print(repr(functai.compaction(keep=2, every=2)))
    except functai.FunctAIError as error:
        print(error.code, "|", error.message)
''')


def docs_replacement(tmp_path):
    """The replacement compaction of docs/builtins.md, as the folder the page describes."""
    import re

    page = (ROOT / "docs" / "builtins.md").read_text()
    folder = tmp_path / "my-compaction"
    folder.mkdir()
    for body in re.findall(r"```\w*\n(.*?)```", page, flags=re.S):
        first = body.splitlines()[0]
        if first.startswith("# my-compaction/"):
            (folder / first.removeprefix("# my-compaction/")).write_text(body)
    assert sorted(p.name for p in folder.iterdir()) == ["my_compaction.py", "pyproject.toml"]
    return str(folder)


def test_uninstalling_compaction_names_it_and_a_replacement_is_used(venv, tmp_path, source_copy):
    assert run(venv, COMPACTION) == 'Plugin("compaction", 0.1.0: context, turn_end)'
    uninstall(venv, "functai-compaction")
    try:
        out = run(venv, COMPACTION)
        assert out.startswith("builtin-missing |") and "functai install ./functai_builtin_plugins/compaction (in a" in out
        install(venv, docs_replacement(tmp_path))  # the example of docs/builtins.md, as written there
        assert run(venv, COMPACTION) == 'Plugin("compaction", 1.0.0: context)'
        listing = subprocess.run([str(venv.parent / "functai"), "plugins"], capture_output=True, text=True,
                                 env={k: v for k, v in os.environ.items() if not k.startswith("FUNCTAI_")})
        row = next(line for line in listing.stdout.splitlines() if line.startswith("compaction "))
        assert row.split() == ["compaction", "my-compaction", "1.0.0", "my_compaction:compaction"]
        uninstall(venv, "my-compaction")
    finally:
        install(venv, str(source_copy / "functai_builtin_plugins" / "compaction"))
    assert run(venv, COMPACTION) == 'Plugin("compaction", 0.1.0: context, turn_end)'


def test_the_example_plugin_installs_after_this_functai_and_its_tests_pass(venv, source_copy):
    """README and docs/writing-plugins.md: this functai first (the fixture), then the plugin."""
    example = source_copy / "examples" / "functai-plugin-example"
    subprocess.run([*pip(venv, "install", "--no-build-isolation"), str(example), "pytest>=7.4"], check=True)
    try:
        origin = run(venv, "import json, importlib.metadata as m; "
                           "print(json.loads(m.distribution('functai').read_text('direct_url.json'))['url'])")
        assert origin == source_copy.as_uri()  # the plugin's `functai>=0.1,<0.2` was met by this functai: nothing fetched
        tests = subprocess.run(
            [str(venv), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(example / "tests")],
            capture_output=True, text=True, cwd=str(example),
            env={k: v for k, v in os.environ.items() if not k.startswith("FUNCTAI_")},
        )
        assert tests.returncode == 0, tests.stdout + tests.stderr
        assert " passed" in tests.stdout
    finally:
        uninstall(venv, "functai-plugin-example")


GATEWAY = textwrap.dedent('''
    import functai

    @functai.ai
    def capital(country: str) -> str:
        """The capital city of the country."""

    functai.configure(lm="gateway/small-model")
    print(capital("Peru"))
''')


def test_an_installed_provider_distribution_serves_its_models(venv, source_copy):
    from loopback import LoopbackServer, Scripted, completion

    install(venv, str(source_copy / "examples" / "functai-provider-example"))
    try:
        with LoopbackServer(default=Scripted(body=completion("Lima"))) as server:
            out = run(venv, GATEWAY, GATEWAY_BASE_URL=server.url, GATEWAY_API_KEY="gw-key-0123456789",
                      OPENAI_API_KEY="sk-openai-not-for-the-gateway")
        assert out == "Lima"
        [got] = server.requests
        assert got.body["model"] == "small-model"
        assert got.headers["authorization"] == "Bearer gw-key-0123456789"
        assert got.headers["x-gateway-app"] == "functai-example"
    finally:
        uninstall(venv, "functai-provider-example")


def functai_command(python, *args, **options):
    """The venv's own `functai` console script."""
    return subprocess.run([str(python.parent / "functai"), *args], capture_output=True, text=True, cwd="/",
                          env={k: v for k, v in os.environ.items() if not k.startswith("FUNCTAI_")}, **options)


def test_functai_install_and_uninstall_a_local_plugin_then_list_plugins(venv, tmp_path):
    folder = package(tmp_path, "functai-local-ear", '''
        import functai

        @functai.hookimpl
        def call_end(call):
            pass
    ''', {"functai": {"local-ear": "functai_local_ear"}})
    done = functai_command(venv, "install", folder)
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("local-ear"))
    assert row.split()[:5] == ["local-ear", "1.2.3", "functai-local-ear", "1", "call_end"] and "loaded" in row
    assert f"installed into {venv.parent.parent}" in done.stdout
    assert "local-ear" in functai_command(venv, "plugins").stdout

    done = functai_command(venv, "uninstall", "-y", "functai-local-ear")
    assert done.returncode == 0, done.stderr
    table = done.stdout[done.stdout.index("installed plugins"):]  # after pip's own lines
    assert "local-ear" not in table and "approval" in table
    assert "local-ear" not in functai_command(venv, "plugins").stdout

    done = functai_command(venv, "install", str(tmp_path / "no-such-plugin"))
    assert done.returncode == 1 and "functai: error [pip-failed]" in done.stderr
    done = functai_command(venv, "uninstall", "-y", "functai")
    assert done.returncode == 2 and "it is functai itself" in done.stderr


@pytest.mark.parametrize("stdin", ["empty", "closed"])
def test_functai_uninstall_run_by_a_script_uninstalls_without_asking_or_a_traceback(venv, tmp_path, stdin):
    name = f"functai-quiet-{stdin}"
    install(venv, package(tmp_path, name, '''
        import functai

        @functai.hookimpl
        def call_end(call):
            pass
    ''', {"functai": {f"quiet-{stdin}": name.replace("-", "_")}}))
    assert f"quiet-{stdin}" in functai_command(venv, "plugins").stdout
    if stdin == "empty":  # a pipe or /dev/null: reading gives end of file at once
        done = functai_command(venv, "uninstall", name, stdin=subprocess.DEVNULL)
    else:  # no stdin at all (a service, `functai ... <&-`)
        done = functai_command(venv, "uninstall", name, stdin=subprocess.DEVNULL, preexec_fn=lambda: os.close(0))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr + done.stdout and "EOFError" not in done.stderr + done.stdout
    assert "Proceed" not in done.stdout and "[y/N]" not in done.stderr  # nobody was asked
    assert f"quiet-{stdin}" not in done.stdout[done.stdout.index("installed plugins"):]
    assert f"quiet-{stdin}" not in functai_command(venv, "plugins").stdout


def test_functai_uninstall_at_a_terminal_answered_yes_uninstalls_without_pips_own_question(venv, tmp_path):
    install(venv, package(tmp_path, "functai-asked", '''
        import functai

        @functai.hookimpl
        def call_end(call):
            pass
    ''', {"functai": {"asked": "functai_asked"}}))
    assert "asked" in functai_command(venv, "plugins").stdout
    status, out, err = uninstall_at_a_terminal([str(venv.parent / "functai"), "uninstall", "functai-asked"], "y",
                                               tmp_path)
    assert status == 0, err
    assert err.count("[y/N]") == 1 and "Proceed" not in out + err and "Traceback" not in err
    assert "Successfully uninstalled functai-asked" in out
    assert "asked" not in out[out.index("installed plugins"):]
    assert "asked" not in functai_command(venv, "plugins").stdout


def test_an_installed_plugin_made_for_another_functai_fails_closed_as_incompatible(venv, tmp_path):
    folder = package(tmp_path, "functai-future", '''
        raise RuntimeError("an incompatible plugin is never imported")
    ''', {"functai": {"future": "functai_future"}})
    pyproject = pathlib.Path(folder) / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "1.2.3"',
                                                       'version = "1.2.3"\ndependencies = ["functai>=99"]'))
    subprocess.run([*pip(venv, "install", "--no-build-isolation", "--no-deps"), folder], check=True)
    try:
        out = run(venv, SHOW_SYSTEM)
        assert out.startswith("plugin-incompatible |")
        assert "functai>=99" in out and f"this is functai {functai_version}" in out and "functai-future 1.2.3" in out
        listing = functai_command(venv, "plugins").stdout
        assert "future" in listing and "supports functai>=99" in listing and "refuses plugin-incompatible" in listing
        assert run(venv, SHOW_SYSTEM, FUNCTAI_DISABLE_PLUGINS="future") == "'Answer.' []"
    finally:
        uninstall(venv, "functai-future")


def test_a_hookimpl_module_given_directly_takes_its_distributions_version(venv, tmp_path):
    install(venv, package(tmp_path, "functai-versioned", '''
        import functai

        @functai.hookimpl
        def before_call(call):
            return functai.Change(sections=["V."])
    ''', {}))
    try:
        program = SHOW_SYSTEM.replace("functai.configure(client=lm)",
                                      "import functai_versioned\nfunctai.configure(client=lm, plugins=[functai_versioned])")
        assert run(venv, program) == "'Answer.\\n\\nV.' [('functai_versioned', '1.2.3')]"
    finally:
        uninstall(venv, "functai-versioned")


STORE_PROGRAM = textwrap.dedent('''
    import sys
    import functai
    from functai._stores import open_store
    from functai.testing import ScriptedLM

    @functai.ai
    def echo(text: str) -> str:
        """Echo."""

    functai.configure(client=ScriptedLM(["one", "two"]))
    chat = echo.conversation("c", store=sys.argv[1])
    chat("first")
    again = echo.conversation("c", store=sys.argv[1])
    print(type(chat.store).__name__, again("second"), len(again.turns))
    for url in ("nosuch://x", "postgresql://127.0.0.1/db"):  # psycopg is not installed in this venv
        try:
            open_store(url)
        except functai.FunctAIError as error:
            print(error.code, "|", error.message)
''')


def test_an_installed_store_is_found_by_its_url_scheme(venv, tmp_path):
    install(venv, package(tmp_path, "functai-store-x", '''
        from functai._stores import FolderStore

        class LinesStore(FolderStore):
            """A folder store under its own scheme: lines:///absolute/folder."""

        def open_store(url):
            return LinesStore(url[len("lines://"):])
    ''', {"functai.stores": {"lines": "functai_store_x:open_store"}}))
    try:
        folder = tmp_path / "convs"
        out = subprocess.run([str(venv), "-c", STORE_PROGRAM, f"lines://{folder}"], capture_output=True,
                             text=True, cwd="/").stdout.splitlines()
        assert out[0] == "LinesStore two 2"
        assert [line.split('"kind":"')[1].split('"')[0] for line in (folder / "c.jsonl").read_text().splitlines()] \
            == ["conversation", "turn", "reply", "end", "turn", "reply", "end"]
        assert out[1].startswith("store-url |") and "lines:" in out[1] and "'functai.stores'" in out[1]
        assert out[2].startswith("store-driver-missing |") and 'pip install "psycopg[binary]>=3.1"' in out[2]
    finally:
        uninstall(venv, "functai-store-x")
