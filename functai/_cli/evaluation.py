"""``functai rate`` (a verdict on a logged call) and ``functai evaluate`` (ask a function again on them)."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
from typing import Any, TextIO

from .._calls.outputs import describe, read_output
from .._calls.records import CallRecord, not_kept
from .._errors import OutputError
from .._stores.protocol import json_kind
from .calls import find
from .._runners import find_runner
from .common import (
    INPUT,
    LOG_HELP,
    RUNNER_HELP,
    RUNTIME,
    CLIError,
    ai_function,
    log_folder,
    number,
    plural,
    positive,
    require_model,
    short,
)


def register(commands: Any) -> None:
    rate = commands.add_parser("rate", help="rate a logged call, good or bad")
    rate.add_argument("id", help="the call id (a unique prefix is enough)")
    verdict = rate.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--good", dest="good", action="store_true", help="the answer was good")
    verdict.add_argument("--bad", dest="good", action="store_false", help="the answer was bad")
    rate.add_argument("--correction", help="the answer it should have given")
    rate.add_argument("--by", help="who rates")
    rate.add_argument("--log", help=LOG_HELP)
    rate.set_defaults(run=cmd_rate)

    evaluate = commands.add_parser("evaluate", help="ask a function again on its rated calls; print the score")
    evaluate.add_argument("function", help="MODULE:FUNCTION (importable from here)")
    evaluate.add_argument("--log", help=LOG_HELP)
    evaluate.add_argument("--workers", type=positive, default=None, help="rows asked at once (default 4)")
    evaluate.add_argument("--min-score", type=number(float, 0, 1), default=None, metavar="SCORE",
                          help="exit 1 when the score is below SCORE (0 to 1); without it a low score exits 0")
    evaluate.add_argument("--runner", metavar="NAME", help=RUNNER_HELP)
    evaluate.add_argument("--rate", type=_rate, metavar="N/s|N/min|N/h",
                          help="ask at most N rows per second, minute or hour (with a runner that queues rows)")
    evaluate.set_defaults(run=cmd_evaluate)

    worker = commands.add_parser("worker", help="serve as a worker of a runner: run the turns and rows it is given",
                                 description="Import the modules that define the AI functions, then serve as a "
                                 "worker of the runner until it stops. The default runner has no workers.")
    worker.add_argument("--runner", metavar="NAME", required=True, help=RUNNER_HELP)
    worker.add_argument("--import", dest="imports", metavar="MODULE", action="append", default=[],
                        help="a module to import first, where the functions it runs are defined (repeatable)")
    worker.set_defaults(run=cmd_worker)


def cmd_rate(args: argparse.Namespace, out: TextIO) -> int:
    from .._evaluation import rate

    folder = log_folder(args.log)
    record = find(folder, args.id, args.err)
    correction = None if args.correction is None else _correction(record, args.correction)
    rating = rate(record.id, good=args.good, correction=correction, by=args.by, log=folder)
    verdict = "good" if rating.good else "bad"
    fix = f", correction {short(rating.correction)}" if rating.correction is not None else ""
    print(f"rated {rating.call} {verdict}{fix}" + (f" (by {rating.by})" if rating.by else ""), file=out)
    return 0


def _correction(record: CallRecord, text: str) -> Any:
    """``--correction TEXT`` read as the function's reply would be, or a correction that can never
    match would fail every evaluation row it makes. The type is the function's when it imports
    from here, else the kind of JSON value the call recorded (text when nothing tells)."""
    fn = None
    if record.module and record.module != "__main__":
        with contextlib.suppress(CLIError):  # not importable from here: the recorded value tells
            fn = ai_function(f"{record.module}:{record.function}")
    if fn is not None:
        try:
            return read_output(text, fn.output_type)
        except OutputError as error:
            raise CLIError(f"--correction {short(text)!r} is not a {describe(fn.output_type)}, the output type of "
                           f"{record.module}:{record.function}: {error.message}", code="input-invalid",
                           hint="give the answer it should have given, as JSON of that type (text as it is for str)"
                           ) from None
    kind = json_kind(record.output)
    if kind in ("null", "string", "value") or not_kept(record.output):  # no content
        return text
    whole = kind == "number" and isinstance(record.output, int)  # an integer output takes an integer correction
    try:
        value = json.loads(text)
    except ValueError:
        fits = False
    else:
        fits = json_kind(value) == kind and (isinstance(value, int) or not whole)
    if not fits:
        raise CLIError(f"--correction {short(text)!r} is not a JSON {'integer' if whole else kind}, as the call's "
                       f"recorded output {short(record.output)} is", code="input-invalid",
                       hint="give the answer it should have given, as JSON of the function's output type")
    return value


_PERIODS = {"s": 1.0, "min": 60.0, "h": 3600.0}


def _rate(text: str) -> tuple[int, float]:
    """``N/min`` (or ``/s``, ``/h``) as (N, seconds)."""
    count, _, per = text.partition("/")
    if not count.strip().isdigit() or int(count) < 1 or per.strip() not in _PERIODS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate: give N/s, N/min or N/h with N a positive integer")
    return int(count), _PERIODS[per.strip()]


def cmd_evaluate(args: argparse.Namespace, out: TextIO) -> int:
    program = ai_function(args.function)
    folder = log_folder(args.log)
    require_model(program)  # a score of rows that all failed no-model would say nothing true
    limits = {"rate": args.rate} if args.rate else {}  # a runner that queues no rows takes no rate
    result = find_runner(args.runner).evaluate(program, log=folder, workers=args.workers, progress_to=args.err,
                                               **limits)
    print(result.table(), file=out)
    failed = result.model_failures
    if failed:  # an outage scored as 0 would pass for a bad function in CI
        codes = sorted({row.code for row in failed if row.code})
        raise CLIError(
            f"{len(failed)} of {plural(len(result.rows), 'row')} failed because the model could not be used "
            f"({', '.join(codes)}), so the score measures the model's outage, not the function: {failed[0].error}",
            code=failed[0].code or "model-error", status=RUNTIME,
            hint="check the model (FUNCTAI_LM, its key and base URL) and run it again")
    if args.min_score is not None and result.score < args.min_score:
        raise CLIError(f"the score {result.score:.3f} is below --min-score {args.min_score:g}", code="min-score",
                       status=RUNTIME)
    return 0


def cmd_worker(args: argparse.Namespace, out: TextIO) -> int:
    runner = find_runner(args.runner)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for module in args.imports:
        try:
            importlib.import_module(module)
        except ImportError as error:  # the module itself missing (exit 2), or something it imports (exit 1)
            missing = isinstance(error, ModuleNotFoundError) and error.name == module
            raise CLIError(f"--import {module}: {error}", code="not-found" if missing else "import-failed",
                           status=INPUT if missing else RUNTIME,
                           hint="run it where the module imports (its folder, or with it installed)") from error
    return runner.worker(tuple(args.imports))
