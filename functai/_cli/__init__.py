"""The ``functai`` command (also ``python -m functai``).

Each module named in `COMMANDS` has ``register(commands)`` adding its
subcommands; a command is ``run(args, out) -> int`` and fails by raising.
`main` reports every failure as one line ``functai: error [code]: message``.
What only one command needs is imported inside it, so ``--help`` stays fast.
"""

from __future__ import annotations

from .app import COMMANDS, main, parser
from .common import INPUT, RUNTIME, CLIError

__all__ = ["COMMANDS", "CLIError", "INPUT", "RUNTIME", "main", "parser"]
