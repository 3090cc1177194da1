"""``functai replay ID``: a logged call's first request rebuilt with plugins left out or added,
and the first place it differs from the recorded one (docs/evaluating.md, *What-if replay*)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from .._calls.reading import read_calls
from .._errors import PluginError
from .calls import find
from .common import LOG_HELP, CLIError, ai_function, log_folder


def register(commands: Any) -> None:
    replay = commands.add_parser("replay", help="a logged call's request rebuilt without (or with) plugins; "
                                                "the first difference")
    replay.add_argument("id", help="the call id (a unique prefix is enough)")
    replay.add_argument("--log", help=LOG_HELP)
    replay.add_argument("--without", action="append", default=[], metavar="PLUGIN",
                        help="leave this plugin's recorded changes out (repeat for more)")
    replay.add_argument("--with", dest="with_", action="append", default=[], metavar="PLUGIN",
                        help="run this plugin's before_call and request handlers: a plugin the function runs "
                             "here, an installed one, or a plugin file (repeat for more)")
    replay.add_argument("--lm", metavar="MODEL", help="lay the request out for this model (and ask it, with --ask)")
    replay.add_argument("--ask", action="store_true",
                        help="send the rebuilt request and show the new answer beside the recorded one")
    replay.add_argument("--yes", action="store_true",
                        help="with --ask: send settings that differ from the function's own (shown when refused)")
    replay.add_argument("--function", metavar="MODULE:FUNCTION",
                        help="the call's AI function, when the one it records does not import from here "
                             "(a script's: path/to/script.py:NAME)")
    replay.add_argument("--json", action="store_true", help="print the replay as JSON")
    replay.set_defaults(run=cmd_replay)


def cmd_replay(args: argparse.Namespace, out: TextIO) -> int:
    from .._evaluation.replay import NotReplayable, turn_calls
    from .._evaluation.whatif import rebuild

    folder = log_folder(args.log)
    record = find(folder, args.id, args.err)
    reference = args.function or f"{record.module}:{record.function}"
    if not args.function and record.module in ("", "__main__"):
        raise CLIError(f"call {record.id} was made by a script run as a program, so its function is recorded as "
                       f"{reference}, which this command cannot import", code="script-function",
                       hint=f"name the script: --function path/to/script.py:{record.function}")
    if not args.function and record.module not in sys.modules:  # said before it runs: an import runs its code
        print(f"functai: importing {record.module} (the module call {record.id} names) for its function "
              f"{record.function}; --function MODULE:FUNCTION names another", file=args.err)
    try:
        program = ai_function(reference)
    except CLIError as error:
        if not args.function:
            error.hint = (f"{reference} is the call's function: run this where it is importable, or name it with "
                          "--function MODULE:FUNCTION")
        raise
    calls = turn_calls(read_calls(folder)) if "shown" in (record.conversation or {}) else None
    try:
        if args.ask:
            _check_settings(args, rebuild(record, program, calls, args.without, args.with_, args.lm), program)
        result = rebuild(record, program, calls, args.without, args.with_, args.lm, args.ask)
    except NotReplayable as error:
        raise CLIError(error.message, code=error.code,
                       hint="`functai show ID` shows what the record keeps; a replaced request is not kept") from None
    except PluginError as error:
        if error.code == "plugin-load" and error.plugin in args.with_:  # --with named a plugin not here
            raise CLIError(error.message, code=error.code) from None
        raise
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False), file=out)
    else:
        print(result.report(), file=out)
    return 0


def _check_settings(args: argparse.Namespace, dry: Any, program: Any) -> None:
    """Refuse (``replay-settings``) to send settings, or a model, other than the function's own without
    ``--yes``: a record may hold any (``n: 64``, ``max_tokens: 100000``), and it goes out with your key."""
    from .._evaluation.whatif import own_model, own_settings

    sending, own = dict(dry.rebuilt.settings), own_settings(program)
    model, mine = dry.rebuilt.model, own_model(program)
    if args.yes or (sending == own and (args.lm or mine is None or model == mine)):
        return
    raise CLIError(f"the rebuilt request would be sent to the model {model!r} with the settings "
                   f"{json.dumps(sending, sort_keys=True)} (from the record), where {program.module}:{program.name} "
                   f"has {'' if mine is None else repr(mine) + ' with '}{json.dumps(own, sort_keys=True)}; nothing "
                   "was sent", code="replay-settings",
                   hint="add --yes to send it as shown (--lm names the model), or leave out --ask to see the "
                        "request only")
