"""JSON encode and decode of real record lines: the standard library, orjson, msgspec, functai._codec.

The lines are made by running functai: the call log of a plain call, of a
call with a plugin's change, of a one-tool round trip and of two conversation
turns, plus the folder store's records of those turns. Each case is timed
over all of them, in interleaved rounds (every case once per round, in
turn); the figure is the median round, process CPU time next to wall time,
in µs per line.

    python benchmarks/bench_codec.py [--rounds 21] [--repeat 2000]

orjson and msgspec are measured when installed (``pip install orjson msgspec``).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

import functai
from functai import Change, Plugin, ai
from functai.testing import ScriptedLM, tool_call


@functai.tool(effects="reads")
def lookup(key: str) -> str:
    """Look a key up."""
    return "value"


@ai(tools=[lookup])
def researched(question: str) -> str:
    """Answer, looking things up."""


@ai
def capital(country: str) -> str:
    """The capital city of the country."""


def _tool_round_trip(request: Any) -> Any:
    if request.messages[-1]["role"] == "tool":
        return "done"
    return tool_call("lookup", {"key": "k"})


def real_lines(folder: str) -> list[bytes]:
    """The call log and conversation store lines a few real calls write."""
    log = os.path.join(folder, "log")
    modes = Plugin("modes", before_call=lambda call: Change(sections=["Be careful."]))
    with functai.settings(client=ScriptedLM(reply=lambda r: "Lima"), log_calls=log, plugins=[]):
        capital("Peru")
    with functai.settings(client=ScriptedLM(reply=lambda r: "Lima"), log_calls=log, plugins=[modes]):
        capital("Peru")
    with functai.settings(client=ScriptedLM(reply=_tool_round_trip), log_calls=log, plugins=[]):
        researched("q")
    with functai.settings(client=ScriptedLM(reply=lambda r: "Lima"), log_calls=log, plugins=[]):
        chat = capital.conversation("c1", store=os.path.join(folder, "conversations"))
        chat("Peru")
        chat("Chile")
    lines: list[bytes] = []
    for path in [os.path.join(log, "calls.jsonl"), *glob.glob(os.path.join(folder, "conversations", "*.jsonl"))]:
        with open(path, "rb") as handle:
            lines.extend(line.rstrip(b"\n") for line in handle)
    return lines


def cases() -> dict[str, tuple[Callable[[Any], bytes], Callable[[bytes], Any]]]:
    """``name: (encode, decode)`` for each codec that is importable."""
    stdlib = json.JSONEncoder(ensure_ascii=False, default=str)  # what the call log used before
    found: dict[str, tuple[Callable[[Any], bytes], Callable[[bytes], Any]]] = {
        "json (stdlib)": (lambda data: stdlib.encode(data).encode(), json.loads),
    }
    try:
        import orjson
    except ImportError:
        pass
    else:
        found["orjson"] = (lambda data: orjson.dumps(data, default=str), orjson.loads)
    try:
        import msgspec
    except ImportError:
        pass
    else:
        encoder, decoder = msgspec.json.Encoder(enc_hook=str), msgspec.json.Decoder()
        found["msgspec"] = (encoder.encode, decoder.decode)
    try:
        from functai import _codec as codec
    except ImportError:
        pass
    else:
        found["functai._codec"] = (codec.dumps, codec.loads)
    return found


def timed(run: Callable[[], None], repeat: int, items: int) -> tuple[float, float]:
    """(CPU µs, wall µs) per item for ``repeat`` runs over ``items`` items."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(repeat):
        run()
    return ((time.process_time() - cpu) / repeat / items * 1e6, (time.perf_counter() - wall) / repeat / items * 1e6)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        lines = real_lines(folder)
    objects = [json.loads(line) for line in lines]
    codecs = cases()
    for name, (encode, decode) in codecs.items():  # every codec reads and writes the same data
        for obj, line in zip(objects, lines):
            assert decode(encode(obj)) == obj == decode(line), name
    runs: dict[str, Callable[[], None]] = {}
    for name, (encode, decode) in codecs.items():
        runs[f"{name} encode"] = lambda encode=encode: [encode(obj) for obj in objects] and None
        runs[f"{name} decode"] = lambda decode=decode: [decode(line) for line in lines] and None
    for run in runs.values():
        run()
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    wall: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, run in runs.items():
            c, w = timed(run, args.repeat, len(lines))
            cpu[name].append(c)
            wall[name].append(w)
    size = statistics.mean(map(len, lines))
    print(f"python {sys.version.split()[0]}, {len(lines)} real record lines (mean {size:.0f} bytes), "
          f"{args.rounds} interleaved rounds x {args.repeat} passes; µs per line, median round")
    print("| codec | CPU µs | wall µs |")
    print("|---|---|---|")
    for name in runs:
        print(f"| {name} | {statistics.median(cpu[name]):.2f} | {statistics.median(wall[name]):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
