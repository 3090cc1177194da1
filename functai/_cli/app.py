"""The parser built from the command modules, and the one place failures are reported."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
import traceback
import warnings
from typing import Any, NoReturn, Sequence, TextIO

from .._errors import FunctAIError
from .._log import logger
from .._version import __version__
from . import added
from .common import INPUT, RUNTIME, CLIError

#: The modules (in this package) whose ``register(commands)`` adds subcommands, in help order.
COMMANDS: tuple[str, ...] = ("demo", "calls", "conversations", "plugins", "manage", "evaluation", "replay", "stores")

#: Library error codes that mean the command line named something wrong (exit 2, not 1).
INPUT_CODES: frozenset[str] = frozenset({"conversation-id", "unknown-call", "no-call-log", "input-invalid",
                                         "store-version", "store-url", "store-copy", "replay-offline-model",
                                         "runner-unknown", "runner-no-workers", "runner-unsupported"})


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose mistakes are `CLIError`s, reported like every other failure."""

    def error(self, message: str) -> NoReturn:
        raise CLIError(message, code="usage", hint=f"see `{self.prog} --help`")


def parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``functai`` argument parser, with every command module's subcommands.

    The commands installed distributions add are loaded only when ``argv`` names none of the built-in
    commands, or is the bare ``plugins`` listing, which lists them: a distribution's register that
    hangs or exits the process cannot take ``functai calls`` or ``plugins doctor`` down with it."""
    top = Parser(prog="functai", description="Typed functions answered by a language model.")
    top.add_argument("--debug", action="store_true",
                     help="show the traceback of a failure (accepted anywhere on the line)")
    top.add_argument("--version", action="version", version=f"functai {__version__}")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for name in COMMANDS:
        importlib.import_module(f"{__package__}.{name}").register(commands)
    words = [arg for arg in argv or () if not arg.startswith("-")]
    if words == ["plugins"] or not words or words[0] not in commands.choices:
        added.add_installed(commands)  # after the built-ins: one may not take a built-in's name
    return top


def _take_debug(argv: list[str]) -> tuple[list[str], bool]:
    """``--debug`` anywhere before a ``--`` (so it works after a subcommand's name too)."""
    end = argv.index("--") if "--" in argv else len(argv)
    rest = [arg for arg in argv[:end] if arg != "--debug"] + argv[end:]
    return rest, len(rest) != len(argv)


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the exit flush cannot fail again."""
    with contextlib.suppress(OSError, ValueError):  # stdout is not a real file
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run ``functai ARGS``; returns the exit status (0 ok, 1 failed at run time, 2 bad usage or input)."""
    argv, debug = _take_debug(list(sys.argv[1:] if argv is None else argv))
    strict = out is None and getattr(sys.stdout, "errors", None) == "strict" and hasattr(sys.stdout, "reconfigure")
    if strict:  # a name the encoding cannot write (a file name's undecodable bytes) is shown escaped, not fatal
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    # Started with stdout or stderr closed (``>&-``), Python gives None: what would go there goes nowhere.
    out = out or sys.stdout or open(os.devnull, "w")  # noqa: SIM115  (for the process's life)
    err = err or sys.stderr or open(os.devnull, "w")  # noqa: SIM115

    def show(message: Warning | str, *where: Any, **more: Any) -> None:
        """A warning as one ``functai: warning: …`` line, without source line or path."""
        print(f"functai: warning: {str(message).removeprefix('functai: ')}", file=err)

    lines = _Lines(err)  # the command line is an application: it shows functai's log events
    logger().addHandler(lines)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = show
            return _run(argv, out, err, debug)
    finally:
        logger().removeHandler(lines)
        if strict:
            sys.stdout.reconfigure(errors="strict")  # type: ignore[union-attr]


class _Lines(logging.Handler):
    """functai's log events of ``WARNING`` and above as ``functai: warning: …`` lines on ``err``."""

    def __init__(self, err: TextIO) -> None:
        super().__init__(logging.WARNING)
        self.err = err

    def emit(self, record: logging.LogRecord) -> None:
        print(f"functai: warning: {record.getMessage()}", file=self.err)


def _run(argv: list[str], out: TextIO, err: TextIO, debug: bool) -> int:
    try:
        try:
            args = parser(argv).parse_args(argv)
        except SystemExit as done:  # --help, --version: argparse printed and wants to stop
            return int(done.code or 0)
        args.err = err  # where a command says what it skipped, beside failures
        status = int(args.run(args, out) or 0)
        out.flush()  # a closed pipe shows here, while it can still be handled
        return status
    except KeyboardInterrupt:
        print("functai: interrupted", file=err)
        return 130
    except BrokenPipeError:  # `functai calls | head`: nobody is left to tell
        if out is sys.stdout:
            _silence_stdout()
        return RUNTIME
    except Exception as error:  # noqa: BLE001 - every failure is reported the same way
        if debug:
            traceback.print_exc(file=err)
        code, message, hint, status = _describe(error)
        print(f"functai: error [{code}]: {message}", file=err)
        if hint and not (debug and "--debug" in hint):
            print(f"  hint: {hint}", file=err)
        return status


def _describe(error: Exception) -> tuple[str, str, str | None, int]:
    """The code, message, hint and exit status a failure is reported with."""
    if isinstance(error, CLIError):
        return error.code, error.message, error.hint, error.status
    if isinstance(error, FunctAIError):
        hint = getattr(error, "hint", None)
        return error.code, error.message, hint, INPUT if error.code in INPUT_CODES else RUNTIME
    again = "run it again with --debug to see the traceback"
    if isinstance(error, OSError):
        where = f" ({error.filename})" if error.filename else ""
        return "os-error", f"{error.strerror or error}{where}", again, RUNTIME
    bug = f"this is a bug in functai or in the code it ran; {again}"
    return "internal", f"{type(error).__name__}: {error}", bug, RUNTIME
