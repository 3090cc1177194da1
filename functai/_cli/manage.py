"""``functai install`` / ``functai uninstall``: plugins in functai's own environment (pipx or any venv).

The plugins table is printed afterwards by a fresh process, as the next program sees it. pip is never
let to ask (a script has nobody to answer, and pip dies on a closed stdin): ``uninstall`` asks itself.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from typing import Any, TextIO

from .common import RUNTIME, CLIError

#: Seconds the plugins table after pip may take (a plugin whose import hangs would hold it).
TABLE_SECONDS = 120.0

#: Distributions ``functai uninstall`` refuses: removing them removes the command itself.
_ESSENTIAL = frozenset({"functai"})


def register(commands: Any) -> None:
    install = commands.add_parser("install", help="pip install plugins into functai's own environment")
    install.add_argument("names", nargs="*", metavar="NAME", help="distributions, paths or URLs, as pip takes them")
    install.add_argument("-e", "--editable", action="append", default=[], metavar="PATH",
                         help="install a local project in editable mode (repeatable)")
    install.add_argument("-r", "--requirement", action="append", default=[], metavar="FILE",
                         help="install the lines of a requirements file, such as `functai plugins freeze` writes "
                              "(repeatable); functai itself is held at this version")
    for *flag, about in (("-U", "--upgrade", "upgrade them to the newest version"),
                         ("--force-reinstall", "reinstall even when up to date"),
                         ("--no-cache-dir", "do not use pip's cache"), ("--pre", "allow pre-release versions")):
        install.add_argument(*flag, dest="flags", action="append_const", const=flag[-1], help=about)
    install.set_defaults(run=cmd_install, flags=[])

    uninstall = commands.add_parser("uninstall", help="pip uninstall plugins from functai's own environment")
    uninstall.add_argument("names", nargs="+", metavar="NAME", help="distribution names")
    uninstall.add_argument("-y", "--yes", action="store_true",
                           help="do not ask for confirmation (it is asked only when stdin is a terminal)")
    uninstall.set_defaults(run=cmd_uninstall)


def _module(name: str, *arguments: str) -> list[str]:
    """``python -m NAME ARGUMENTS`` without the current folder first on the path, where a ``pip.py``
    or a ``functai`` folder would be run in place of the installed one."""
    run = ("import sys; sys.path[:1] = [] if sys.path[0] == '' else sys.path[:1]; import runpy; "
           f"runpy.run_module({name!r}, run_name='__main__', alter_sys=True)")
    return [sys.executable, "-c", run, *arguments]


def _pip(arguments: list[str], what: str) -> None:
    command = _module("pip", *arguments)
    try:
        done = subprocess.run(command)
    except OSError as error:
        raise CLIError(f"cannot run pip ({sys.executable} -m pip): {error}", code="pip-failed",
                       status=RUNTIME) from error
    if done.returncode != 0:
        raise CLIError(f"pip {what} failed (exit status {done.returncode}); nothing else was changed",
                       code="pip-failed", status=RUNTIME, hint="pip's own output above says why")


def _table(out: TextIO) -> None:
    try:
        done = subprocess.run(_module("functai", "plugins"), capture_output=True, text=True, timeout=TABLE_SECONDS)
    except subprocess.TimeoutExpired:
        raise CLIError(f"`functai plugins` did not finish within {TABLE_SECONDS:g} s after pip finished",
                       code="plugins-failed", status=RUNTIME,
                       hint="`functai plugins doctor` names a plugin whose import hangs") from None
    out.write(done.stdout)
    if done.returncode != 0:
        raise CLIError("`functai plugins` failed after pip finished: " + (done.stderr.strip() or "no message"),
                       code="plugins-failed", status=RUNTIME)


def cmd_install(args: argparse.Namespace, out: TextIO) -> int:
    if not args.names and not args.editable and not args.requirement:
        raise CLIError("name at least one plugin distribution to install", code="usage",
                       hint="e.g. functai install ./my-plugin, or functai install ./functai_builtin_plugins/otel "
                            "in a checkout of the functai repository")
    missing = [path for path in args.requirement if not os.path.isfile(path)]
    if missing:
        raise CLIError(f"no requirements file {missing[0]}", code="not-found",
                       hint="write one with: functai plugins freeze > plugins.txt")
    editable = [arg for path in args.editable for arg in ("--editable", path)]
    if not args.requirement:
        _pip(["install", *args.flags, *editable, *args.names], "install")
    else:
        _install_requirements(args, editable)
    print(f"installed into {sys.prefix}", file=out)
    _table(out)
    return 0


def _install_requirements(args: argparse.Namespace, editable: list[str]) -> None:
    """pip install -r, with functai held at the running version: plugins frozen before an upgrade of
    functai must not take it back (pip refuses a set that needs another functai, and changes nothing)."""
    from .._version import __version__

    requirements = [arg for path in args.requirement for arg in ("--requirement", path)]
    with tempfile.TemporaryDirectory(prefix="functai-install-") as folder:
        held = os.path.join(folder, "constraints.txt")
        with open(held, "w", encoding="utf-8") as file:
            file.write(f"functai=={__version__}\n")
        _pip(["install", *args.flags, "--constraint", held, *requirements, *editable, *args.names], "install")


def cmd_uninstall(args: argparse.Namespace, out: TextIO) -> int:
    options = [name for name in args.names if name.startswith("-")]
    if options:  # pip would read them (-r FILE: whatever that file names, functai too)
        raise CLIError(f"functai uninstall takes distribution names, not pip's options: {', '.join(options)}",
                       code="usage")
    essential = [name for name in args.names if _distribution(name) in _ESSENTIAL]
    if essential:
        raise CLIError(f"refusing to uninstall {', '.join(essential)}: it is functai itself", code="usage",
                       hint=f"to remove functai, run {sys.executable} -m pip uninstall functai")
    if not args.yes and _interactive() and not _confirm(args.names, args.err):
        print("nothing was uninstalled", file=out)
        return 0
    _pip(["uninstall", "--yes", *args.names], "uninstall")
    _table(out)
    return 0


def _distribution(requirement: str) -> str:
    """The distribution a requirement names (``functai[postgres]``, ``functai==2.0.0``: functai), as pip compares it."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    try:
        return canonicalize_name(Requirement(requirement).name)
    except InvalidRequirement:
        return canonicalize_name(re.split(r"[\[=<>!~;@\s]", requirement, maxsplit=1)[0])


def _interactive() -> bool:
    """Whether a person can answer: stdin is a terminal."""
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (OSError, ValueError):  # a closed or detached stdin
        return False


def _confirm(names: list[str], err: TextIO) -> bool:
    """Ask once whether to uninstall ``names``; only an answer of y or yes goes on."""
    print(f"uninstall {', '.join(names)} from {sys.prefix}? [y/N] ", end="", file=err, flush=True)
    try:
        answer = sys.stdin.readline()
    except (OSError, ValueError):
        answer = ""
    return answer.strip().lower() in ("y", "yes")
