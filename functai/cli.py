"""The ``functai`` command, for programs that run it and for command authors.

`main` runs it; a command raises `CLIError` (exit `INPUT` or `RUNTIME`) for
what it finds wrong, and `COMMANDS` lists the command groups in order.
"""

from ._cli import COMMANDS, INPUT, RUNTIME, CLIError, main, parser

__all__ = ["COMMANDS", "CLIError", "INPUT", "RUNTIME", "main", "parser"]
