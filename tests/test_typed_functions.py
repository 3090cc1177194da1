"""`@ai` keeps the decorated function's signature for a type checker: `mypy --strict` checks a
user's module that calls AI functions, and refuses a wrong argument or a wrong use of the value.
The built-in distributions ship ``py.typed``, so their factories are typed too."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, before it joined the standard library
    import tomli as tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
TYPING = ROOT / "tests" / "data" / "typing"
BUILTINS = sorted((ROOT / "functai_builtin_plugins").glob("*/pyproject.toml"))


def mypy(*files: pathlib.Path) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` on ``files`` as a user's project runs it: its own configuration, not functai's;
    the checkout and the built-ins found on MYPYPATH, their own errors not reported."""
    path = os.pathsep.join([str(ROOT), *(str(p.parent) for p in BUILTINS)])
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-incremental",
                           "--config-file", os.devnull, *map(str, files)], capture_output=True, text=True,
                          env={**os.environ, "MYPYPATH": path}, cwd=TYPING, timeout=600)


def test_a_users_module_passes_mypy_strict_with_the_types_of_its_ai_functions():
    done = mypy(TYPING / "user_module.py")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found in 1 source file" in done.stdout


def test_a_wrong_argument_or_a_wrong_use_of_the_value_is_a_mypy_error():
    done = mypy(TYPING / "wrong_calls.py")
    assert done.returncode == 1
    errors = [line.split(": error: ", 1) for line in done.stdout.splitlines() if ": error: " in line]
    assert [(where.rsplit(":", 1)[-1], why) for where, why in errors] == [
        ("15", 'Argument 1 to "__call__" of "AIFunction" has incompatible type "int"; expected "str"  [arg-type]'),
        ("16", 'Unexpected keyword argument "extra" for "__call__" of "AIFunction"  [call-arg]'),
        ("17", 'Incompatible types in assignment (expression has type "str", variable has type "int")  [assignment]'),
        ("21", '"RequestEvent" has no attribute "requst"; maybe "request"?  [attr-defined]'),
    ]


def test_every_built_in_distribution_ships_py_typed():
    for project in BUILTINS:
        data = tomllib.loads(project.read_text())
        [package] = data["tool"]["setuptools"]["packages"]
        assert (project.parent / package / "py.typed").is_file(), package
        assert data["tool"]["setuptools"]["package-data"][package] == ["py.typed"], package


def test_every_events_field_is_typed_and_each_hook_has_its_public_class():
    import typing

    import functai
    from functai._hooks.specs import HOOKS

    from functai._hooks import events

    assert sorted(functai.events.BY_HOOK) == sorted(HOOKS)
    names = {**vars(events), "FunctAIError": functai.FunctAIError,
             "Endpoint": functai.Endpoint, "Reply": functai.Reply, "Request": functai.Request}
    for hook, cls in functai.events.BY_HOOK.items():
        hints = typing.get_type_hints(cls, names)
        for field in cls._fields:
            assert field in hints or isinstance(getattr(cls, field, None), property), (hook, field)


def test_a_handler_is_given_the_public_event_class_of_its_hook():
    import functai
    from functai.testing import ScriptedLM

    seen = []
    spy = functai.Plugin("spy", request=seen.append, reply=seen.append, before_call=seen.append)

    @functai.ai
    def echo(text: str) -> str:
        """Say it back."""

    with functai.settings(client=ScriptedLM(["hi"]), plugins=[spy]):
        echo("hi")
    assert [type(event) for event in seen] == [functai.events.BeforeCall, functai.events.Request,
                                               functai.events.Reply]


def test_functai_events_names_each_hooks_class_for_its_hook():
    import functai
    for hook, cls in functai.events.BY_HOOK.items():
        assert getattr(functai.events, "".join(part.title() for part in hook.split("_"))) is cls, hook
