"""The ``functai`` command (also ``python -m functai``).

Each command group is a module of this package with a ``register(commands)``
function that adds its subcommands; `COMMANDS` lists the modules, in the
order ``functai --help`` shows them. A command is ``run(args, out) -> int``
and reports a failure by raising (a `CLIError` for what the command itself
finds wrong, a `FunctAIError` from the library); `main` turns every failure
into one line ``functai: error [code]: message`` on stderr, so no traceback
reaches a user unless ``--debug`` asks for it. What only one command needs
(conversations, evaluation, ``explain``, copying) is imported inside that
command, so ``functai --help`` and the other commands do not pay for it.
"""

from __future__ import annotations

from .app import COMMANDS, main, parser
from .common import INPUT, RUNTIME, CLIError

__all__ = ["COMMANDS", "CLIError", "INPUT", "RUNTIME", "main", "parser"]
