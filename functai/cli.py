"""The ``functai`` command: `main` runs it; a command raises `CLIError` (exit `INPUT` or `RUNTIME`)."""

from ._cli import COMMANDS, INPUT, RUNTIME, CLIError, main, parser

__all__ = ["COMMANDS", "CLIError", "INPUT", "RUNTIME", "main", "parser"]
