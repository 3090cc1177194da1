"""What the command modules share: the error they raise, and small readers and printers."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, TextIO

from .._calls.function import AIFunction
from .._errors import FunctAIError
from .._layers import resolve
from .._stores.opening import open_store
from .._stores.protocol import check_conversation_id
from .._stores.urls import is_url, redact, scheme_of, sqlite_path

if TYPE_CHECKING:
    from .._conversations.history import History

#: Exit statuses: a failure at run time, and a command line that names something wrong.
RUNTIME, INPUT = 1, 2

DEFAULT_LOG = "calls"
LOG_HELP = f"the call log: a folder or a store URL (default: $FUNCTAI_LOG_CALLS or {DEFAULT_LOG})"
RUNNER_HELP = ("where it runs: a runner a distribution adds to the entry-point group functai.runners "
               "(default: process, in this process)")


class CLIError(Exception):
    """A command cannot go on. ``status``: `INPUT` (2) when the command line names something wrong,
    `RUNTIME` (1) when running it failed."""

    def __init__(self, message: str, *, code: str, status: int = INPUT, hint: str | None = None) -> None:
        super().__init__(message)
        self.message, self.code, self.status, self.hint = message, code, status, hint


def log_folder(given: str | None, *, existing: bool = True) -> str:
    """The call log: the one given, else $FUNCTAI_LOG_CALLS, else ``calls``.

    Reading (``existing``) refuses one that is not there: a wrong path must not look like a log with no calls.
    """
    folder = given or os.environ.get("FUNCTAI_LOG_CALLS") or DEFAULT_LOG
    hint = "give the folder or URL that log_calls= (or FUNCTAI_LOG_CALLS) names; the first logged call makes it"
    return folder_or_url(folder, "call log", hint, existing)


def store_folder(given: str) -> str:
    """A conversation store that exists (reading never creates one)."""
    return folder_or_url(given, "store", "give the folder or URL passed as store= when the conversation was made")


def folder_or_url(where: str, what: str, hint: str, existing: bool = True) -> str:
    """``where``, refused when it is a file, or (``existing``) a missing folder or SQLite file.
    Other URLs are checked when read."""
    if is_url(where):
        if existing and scheme_of(where) == "sqlite" and not os.path.isfile(sqlite_path(where)):
            raise CLIError(f"no SQLite {what} {sqlite_path(where)}", code="not-found", hint=hint)
    elif os.path.exists(where) and not os.path.isdir(where):
        raise CLIError(f"{where} is a file, not a {what} folder", code="not-a-folder", hint=hint)
    elif existing and not os.path.exists(where):
        raise CLIError(f"no {what} folder {where}", code="not-found", hint=hint)
    return where


def location(where: str) -> str:
    """A call log or store as messages name it: a folder ends in ``/``; a URL loses its password."""
    if is_url(where):
        return redact(where)
    return where if where.endswith(("/", os.sep)) else where + "/"


def number(kind: Callable[[str], float], low: float, high: float | None = None) -> Callable[[str], Any]:
    """An argparse type: a number read by ``kind`` from ``low`` (to ``high``)."""
    bounds = f"at least {low:g}" if high is None else f"from {low:g} to {high:g}"
    expected = "a whole number" if kind is int else f"a number {bounds}"

    def read(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, not {text!r}") from None
        if not (low <= value and (high is None or value <= high)):  # NaN is in no range
            raise argparse.ArgumentTypeError(f"must be {bounds}, not {text}")
        return value

    return read


positive = number(int, 1)


def short(value: object, width: int = 60) -> str:
    """``value`` on one line, at most ``width`` characters, cut at a word where it can be."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    space = cut.rfind(" ")
    if space > width // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def table(rows: list[list[str]], out: TextIO, indent: str = "") -> None:
    """Print rows in aligned columns (the last column is left ragged)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths)]
        print((indent + "  ".join([*cells, row[-1]])).rstrip(), file=out)


def history(store: str, conversation: str) -> "History":
    """The conversation's records folded into its state; refuses one that is not there."""
    from .._conversations.history import History

    check_conversation_id(conversation)
    found = History()
    found.apply_all(open_store(store_folder(store)).read(conversation))
    if found.count:
        return found
    names = open_store(store).conversations()
    listed = ", ".join(names[:5]) + (f" (and {len(names) - 5} more)" if len(names) > 5 else "")
    raise CLIError(f"no conversation {conversation!r} in {location(store)}", code="not-found",
                   hint=f"the store holds: {listed}" if names else "the store holds no conversations")


def ai_function(reference: str) -> Any:
    """The AI function ``MODULE:FUNCTION`` (or ``path/to/script.py:FUNCTION``) names, imported from here."""
    module_name, colon, qualname = reference.rpartition(":")  # the last colon: a Windows path has one too
    if not colon or not module_name or not qualname or not all(qualname.split(".")):
        raise CLIError(f"{reference!r} is not MODULE:FUNCTION", code="usage",
                       hint="name the function as module:name, e.g. support_app:answer (or path/to/script.py:answer)")
    if module_name.endswith(".py") and not os.path.isfile(module_name):
        raise CLIError(f"no script {module_name}", code="not-found",
                       hint="give the path of the .py file that defines it")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found: Any = load_script(module_name) if module_name.endswith(".py") else importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and (module_name == error.name or module_name.startswith(error.name + ".")):
            raise CLIError(f"no module named {module_name!r}", code="not-found",
                           hint="run this where the module is importable (its folder, or with PYTHONPATH)") from None
        raise CLIError(f"importing {module_name!r} failed: {error}", code="import-failed", status=RUNTIME) from error
    except (Exception, SystemExit) as error:  # a script that exits at import (sys.exit, argparse) fails the same way
        raise CLIError(f"importing {module_name!r} failed: {type(error).__name__}: {error}",
                       code="import-failed", status=RUNTIME, hint="run it again with --debug to see where") from error
    for part in qualname.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise CLIError(f"{module_name!r} has no {qualname!r}", code="not-found") from None
    if not isinstance(found, AIFunction):
        raise CLIError(f"{reference} is a {type(found).__name__}, not an AI function (made with @ai)",
                       code="not-ai-function")
    return found


def load_script(path: str) -> Any:
    """A script loaded as a module named after it, not ``__main__`` (its main block does not run)."""
    stem = os.path.splitext(os.path.basename(path))[0]
    name = stem if stem.isidentifier() and stem not in sys.modules else "__functai_script__"
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None  # a .py path always has a source loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # what a running module finds of itself (dataclasses, pickling)
    spec.loader.exec_module(module)
    return module


def require_model(fn: Any) -> None:
    """Refuse ``no-model`` (and ``plugin-load``) before a command changes anything: a model given
    by ``lm``/``client`` in any layer a call resolves, or by ``FUNCTAI_LM``."""
    values = resolve(fn.own).values
    if values.get("client") is not None or values.get("lm") or os.environ.get("FUNCTAI_LM"):
        return
    raise FunctAIError(f"no model is configured for {fn.name}: set FUNCTAI_LM (e.g. FUNCTAI_LM=openai/gpt-4.1-mini), "
                       "or configure lm=... in the module that defines it", code="no-model")
