"""The ``functai`` command: `main` runs it; a command raises `CLIError` (exit `INPUT` or `RUNTIME`);
`read_typed` reads what a person typed for a tool's input, as ``functai approve --input`` does."""

from ._calls.toolinputs import read_typed
from ._cli import COMMANDS, INPUT, RUNTIME, CLIError, main, parser

__all__ = ["COMMANDS", "CLIError", "INPUT", "RUNTIME", "main", "parser", "read_typed"]
