"""What stream guards (``chunk`` handlers) cost a streamed reply: µs per piece over the same
stream without a guard, and how much later the first text event comes.

Process CPU time (the machine is shared: wall time counts the neighbours too), medians of
interleaved rounds (each round streams every case once, in turn). The guard whose pattern finds
nothing is the key guard docs/async.md ships, over a reply with no key in it.

    python benchmarks/bench_chunk.py [--rounds 21] [--chars 20000] [--chunk 4]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import statistics
import sys
import time
from typing import Any, Callable

import functai
from functai import Change, Plugin, ai
from functai.testing import ScriptedLM

ROOT = pathlib.Path(__file__).resolve().parent.parent
WORDS = ("the model answers with plain words and numbers like 42 or 7 while nothing in it looks like a key "
         "which is what most replies are ")


def shipped_guard() -> Plugin:
    """The ``redact_keys.py`` block of docs/async.md."""
    page = (ROOT / "docs" / "async.md").read_text()
    block = next(b for b in re.findall(r"^```python[ \t]*\n(.*?)^```[ \t]*$", page, re.S | re.M)
                 if b.startswith("# redact_keys.py"))
    namespace: dict[str, Any] = {"__name__": "redact_keys"}
    exec(compile(block, "docs/async.md", "exec"), namespace)
    return namespace["redact_keys"]  # type: ignore[no-any-return]


@ai
def answer(question: str) -> str:
    """Answer."""


Case = Callable[[], float]


def streamed(text: str, chunk: int, plugins: list[Plugin]) -> Case:
    """One streamed call of ``text`` in ``chunk``-character pieces: its CPU µs."""
    block = functai.settings(client=ScriptedLM(reply=lambda request: text, chunk=chunk), plugins=plugins)

    def run() -> float:
        with block:
            cpu = time.process_time()
            with answer.stream("q") as stream:
                for _ in stream:
                    pass
            return (time.process_time() - cpu) * 1e6

    return run


def first_text(text: str, chunk: int, plugins: list[Plugin]) -> Callable[[], tuple[float, int]]:
    """CPU µs from starting a stream to its first text event, and the characters the model had sent."""
    sent = [0]

    class Counting(ScriptedLM):
        def stream(self, request: Any) -> Any:
            for piece in super().stream(request):
                if isinstance(piece, str):
                    sent[0] += len(piece)
                yield piece

    block = functai.settings(client=Counting(reply=lambda request: text, chunk=chunk), plugins=plugins)

    def run() -> tuple[float, int]:
        with block:
            sent[0] = 0
            cpu = time.process_time()
            with answer.stream("q") as stream:
                for event in stream:
                    if event.kind == "text":
                        took = (time.process_time() - cpu) * 1e6
                        return took, sent[0]
        raise AssertionError("no text event")

    return run


def added_per_piece(plugin: Plugin, text: str, chunk: int, repeat: int = 15) -> float:
    """µs per piece of exactly what a guard adds to a sync stream's read of a piece, on a real
    `Guarding`: its ``pull`` against the plain ``next`` it replaces, both in the stream's context;
    the fastest of ``repeat`` runs over the whole text each (CPU time)."""
    import contextvars

    from functai._calls.guards import Guarding, Guards

    pieces = [text[i:i + chunk] for i in range(0, len(text), chunk)]
    handlers = tuple((plugin, handler) for handler in plugin.handlers("chunk"))
    ctx = contextvars.copy_context()
    end = object()

    def plain() -> float:
        chunks = iter(pieces)
        cpu = time.process_time()
        while ctx.run(next, chunks, end) is not end:
            pass
        return time.process_time() - cpu

    def guarded() -> float:
        guarding = Guarding(Guards(handlers, [], "answer", "answer", "id"))
        chunks = iter(pieces)
        cpu = time.process_time()
        while ctx.run(guarding.pull, chunks, end) is not end:
            pass
        return time.process_time() - cpu

    plains, guardeds = [], []
    for _ in range(repeat):
        plains.append(plain())
        guardeds.append(guarded())
    return (min(guardeds) - min(plains)) / len(pieces) * 1e6


def median_rounds(cases: dict[str, Callable[[], Any]], rounds: int, repeat: int) -> dict[str, list[Any]]:
    for run in cases.values():
        run()  # warm caches
    found: dict[str, list[Any]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, run in cases.items():
            found[name].append(statistics.median(run() for _ in range(repeat)) if repeat > 1 else run())
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--chars", type=int, default=20_000, help="characters in the streamed reply")
    parser.add_argument("--chunk", type=int, default=4, help="characters per piece")
    args = parser.parse_args(argv)
    os.environ["FUNCTAI_LOAD_PLUGINS"] = ""
    text = (WORDS * (args.chars // len(WORDS) + 1))[:args.chars]
    pieces = -(-len(text) // args.chunk)
    keys = shipped_guard()
    quiet = Plugin("quiet", chunk=lambda chunk: None)
    hold = Change(hold=True)
    holding = Plugin("holding", chunk_window=64, chunk=lambda chunk: None if chunk.final else hold)
    cases = {
        "no guard": streamed(text, args.chunk, []),
        "a guard that returns None": streamed(text, args.chunk, [quiet]),
        "the shipped key guard, no key in the text": streamed(text, args.chunk, [keys]),
        "a guard that always holds (window 64)": streamed(text, args.chunk, [holding]),
    }
    found = median_rounds(cases, args.rounds, 1)
    base = statistics.median(found["no guard"])
    print(f"python {sys.version.split()[0]}, {args.rounds} interleaved rounds of one streamed reply of "
          f"{len(text)} characters in {pieces} pieces of {args.chunk}; CPU time, medians")
    print("| case | CPU µs per piece | over no guard, µs per piece |")
    print("|---|---|---|")
    for name, times in found.items():
        per = statistics.median(times) / pieces
        over = "" if name == "no guard" else f"{(statistics.median(times) - base) / pieces:+.2f}"
        print(f"| {name} | {per:.2f} | {over} |")
    firsts = {
        "no guard": first_text(text, args.chunk, []),
        "the shipped key guard, no key in the text": first_text(text, args.chunk, [keys]),
        "a guard that always holds (window 64)": first_text(text, args.chunk, [holding]),
    }
    print()
    print("| guard | µs added per piece, its statements alone (fastest of 15) |")
    print("|---|---|")
    for name, plugin in (("a guard that returns None", quiet), ("the shipped key guard, no key in the text", keys),
                         ("a guard that always holds (window 64)", holding)):
        print(f"| {name} | {added_per_piece(plugin, text, args.chunk):.2f} |")
    got = median_rounds(firsts, args.rounds, 5)
    print()
    print("| case | CPU µs to the first text event | characters sent by then |")
    print("|---|---|---|")
    for name, values in got.items():
        print(f"| {name} | {statistics.median(v[0] for v in values):.0f} | {max(v[1] for v in values)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
