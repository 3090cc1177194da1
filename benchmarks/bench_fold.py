"""Where a before_call handler's time goes: the fold alone, without the rest of a call.

Folds ``before_call`` over 0, 10 and 40 handlers (each returning None, or a
fresh ``Change(sections=[…])``) on an event built as the engine builds it,
and times a ``Change(sections=[…])`` made alone. Process CPU time, medians of
interleaved rounds. Run it against another checkout for before/after figures:

    PYTHONPATH=. python benchmarks/bench_fold.py [--rounds 21] [--folds 2000]
    PYTHONPATH=/path/to/old/checkout python benchmarks/bench_fold.py

``--old-events /path/to/old/checkout/functai/_hooks/events.py`` also times the
old module's ``CallEvent`` (it imports nothing of functai) built as the old
engine built it, in the same process and rounds as this one's: a before/after
ratio that the machine's changing speed does not move.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from types import MappingProxyType
from typing import Any, Callable

from functai import Change, Plugin
from functai._calls.run import apply_before_call
from functai._hooks import fold as folding
from functai._hooks.events import CallEvent

SETTINGS: Any = MappingProxyType({})

def new_event() -> Any:
    return CallEvent(function="f", program=None, inputs={}, instruction="I.", sections=(), lm=None,
                     settings=SETTINGS, tools=(), all_tools=(), path="f")


def run_fold(handlers: Any, event: Any, changes: list[Any]) -> None:
    folding.fold("before_call", handlers, event, changes, apply_before_call)


def handlers(count: int, changing: bool) -> tuple[Any, ...]:
    made = []
    for i in range(count):
        if changing:
            plugin = Plugin(f"p{i}", before_call=lambda call, i=i: Change(sections=[f"Rule {i}."]))
        else:
            plugin = Plugin(f"p{i}", before_call=lambda call: None)
        made.append((plugin, plugin._handlers["before_call"][0]))
    return tuple(made)


def fold_case(count: int, changing: bool) -> Callable[[int], float]:
    chosen = handlers(count, changing)

    def run(folds: int) -> float:
        cpu = time.process_time()
        for _ in range(folds):
            run_fold(chosen, new_event(), [])
        return (time.process_time() - cpu) / folds * 1e6

    return run


def change_case(folds: int) -> float:
    cpu = time.process_time()
    for i in range(folds):
        Change(sections=[f"Rule {i}."])
    return (time.process_time() - cpu) / folds * 1e6


def event_case(make: Callable[[], Any]) -> Callable[[int], float]:
    def run(folds: int) -> float:
        cpu = time.process_time()
        for _ in range(folds):
            make()
        return (time.process_time() - cpu) / folds * 1e6

    return run


def old_event_maker(path: str) -> Callable[[], Any]:
    """The old module's CallEvent, made as the old engine made it (keywords, the inputs view at once)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("old_functai_events", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    old = module.CallEvent

    def make() -> Any:
        return old(function="f", program=None, inputs=MappingProxyType({}), instruction="I.", sections=(), lm=None,
                   settings=SETTINGS, tools=(), all_tools=(), path="f", conversation=None, turn=None)

    return make


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--folds", type=int, default=2000)
    parser.add_argument("--old-events", help="an older functai/_hooks/events.py to time its CallEvent alongside")
    args = parser.parse_args(argv)
    cases: dict[str, Callable[[int], float]] = {
        "event, no handler": fold_case(0, False),
        "10 returning None": fold_case(10, False),
        "40 returning None": fold_case(40, False),
        "10 returning a Change": fold_case(10, True),
        "40 returning a Change": fold_case(40, True),
        "Change(sections=[…]) alone": change_case,
        "CallEvent alone": event_case(new_event),
    }
    if args.old_events:
        cases["old CallEvent alone"] = event_case(old_event_maker(args.old_events))
    for run in cases.values():
        run(200)
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, run in cases.items():
            times[name].append(run(args.folds))
    med = {name: statistics.median(values) for name, values in times.items()}
    per_none = (med["40 returning None"] - med["10 returning None"]) / 30
    per_change = (med["40 returning a Change"] - med["10 returning a Change"]) / 30
    made = med["Change(sections=[…]) alone"]
    print(f"python {sys.version.split()[0]}, {args.rounds} interleaved rounds x {args.folds}; CPU µs, medians")
    print("| measure | CPU µs |")
    print("|---|---|")
    print(f"| before_call event built, 0 handlers folded | {med['event, no handler']:.2f} |")
    print(f"| per handler returning None | {per_none:.2f} |")
    print(f"| per handler returning a fresh Change(sections=[…]) | {per_change:.2f} |")
    print(f"|   of which the Change made (timed alone) | {made:.2f} |")
    print(f"|   of which the handler call, check, apply and record entry | {per_change - made:.2f} |")
    print(f"| CallEvent built, as the engine builds it | {med['CallEvent alone']:.2f} |")
    if args.old_events:
        old = med["old CallEvent alone"]
        print(f"| the old CallEvent built, as the old engine built it | {old:.2f} |")
        print(f"| new / old | {med['CallEvent alone'] / old:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
