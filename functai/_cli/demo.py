"""``functai demo``: the README's first command."""

from __future__ import annotations

import argparse
import os
from typing import Any, TextIO

from .._errors import FunctAIError
from .common import RUNTIME, CLIError, folder_or_url

DEFAULT_FOLDER = "functai-demo"


def register(commands: Any) -> None:
    demo = commands.add_parser(
        "demo", help="run a small program (offline unless FUNCTAI_LM names a model)",
        description="Run a small program: AI functions with plugins in three layers, a guarded tool, and a "
        "conversation with compaction and a delegate. Its call log and conversation store are kept in "
        f"--log (default ./{DEFAULT_FOLDER}/) to look at afterwards.",
    )
    demo.add_argument("--log", default=DEFAULT_FOLDER, metavar="DIR",
                      help="where the demo keeps its call log and conversation: a folder "
                           f"(default ./{DEFAULT_FOLDER}/) or a store URL such as sqlite:///demo.db")
    demo.set_defaults(run=cmd_demo)


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    from .._demo import main as demo

    folder_or_url(args.log, "demo", "give --log a folder (it is made when missing)", existing=False)
    try:
        return demo(out, folder=args.log)
    except FunctAIError as error:
        scripted = "unset FUNCTAI_LM to run the demo on its scripted offline model"
        hint = scripted if os.environ.get("FUNCTAI_LM") else None
        raise CLIError(error.message, code=error.code, status=RUNTIME, hint=hint) from error
