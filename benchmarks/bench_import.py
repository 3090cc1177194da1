"""How long ``import functai`` takes, how much of it is functai's own, and that it scans no entry points.

In fresh interpreters, interleaved round by round: ``import functai``; its
dependencies alone — every module outside functai that ``import functai``
loads (pluggy, attrs and the standard library modules they and functai use),
imported in the same order; and ``import functai`` followed by defining an
``@ai`` function and its first call (a `ScriptedLM` answers), so that cost
moved from the import into the first call shows. The difference between the
first two is what functai's own modules cost. Process CPU time next to wall
time, medians of the rounds (wall time doubles on a loaded machine, CPU time
does not). ``--before`` adds an older checkout to the same rounds; its
dependencies are measured too, and the after side's import is given over
them. ``--modules`` lists functai's slowest modules by their
own time (``python -X importtime``, median).

Bytecode is written and read as for an installed package: the runs drop
``PYTHONDONTWRITEBYTECODE`` and keep bytecode under ``--bytecode`` (a
temporary folder by default), so that no run times compiling.

    python benchmarks/bench_import.py [--runs 21] [--before CHECKOUT] [--modules 8] [--python PY]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent

TIMED = ("import time; c, w = time.process_time(), time.perf_counter(); {}; "
         "print(time.process_time() - c, time.perf_counter() - w)")

FIRST_CALL = (
    "import functai; from functai.testing import ScriptedLM\n"
    "@functai.ai\ndef answer(question: str) -> str:\n    '''Answer.'''\n"
    "functai.configure(client=ScriptedLM(reply=lambda request: 'ok'))\n"
    "assert answer('q') == 'ok'"
)

PYTHON = sys.executable
BYTECODE: str | None = None


def _env(root: pathlib.Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("FUNCTAI_")}
    env["PYTHONPATH"] = os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["FUNCTAI_LOAD_PLUGINS"] = ""  # installed plugins are discovery's cost, not the import's
    if BYTECODE:
        env["PYTHONPYCACHEPREFIX"] = BYTECODE
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # no bytecode folder named: leave the checkout as it is
    return env


def dependencies(root: pathlib.Path) -> str:
    """``import a; import b; ...``: the modules outside functai that ``import functai`` loads, in order."""
    code = ("import sys; before = set(sys.modules); import functai, json; "
            "print(json.dumps([m for m in sys.modules if m not in before]))")
    loaded = json.loads(subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True,
                                       env=_env(root), cwd="/").stdout)
    outside = [m for m in loaded if m.partition(".")[0] != "functai" and not m.startswith("_")]
    return "; ".join(f"import {m}" for m in outside) or "pass"


def timed(root: pathlib.Path, statement: str) -> tuple[float, float]:
    out = subprocess.run([PYTHON, "-c", TIMED.format(statement)], capture_output=True, text=True, check=True,
                         env=_env(root), cwd="/").stdout.split()
    return float(out[0]), float(out[1])


def own_modules(root: pathlib.Path, runs: int) -> list[tuple[float, str]]:
    """functai's modules by their own import time (µs → ms), median over ``runs``."""
    selfs: dict[str, list[int]] = collections.defaultdict(list)
    for _ in range(runs):
        err = subprocess.run([PYTHON, "-X", "importtime", "-c", "import functai"], capture_output=True,
                             text=True, check=True, env=_env(root), cwd="/").stderr
        for line in err.splitlines():
            parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
            if len(parts) == 3 and parts[2].partition(".")[0] == "functai":
                selfs[parts[2]].append(int(parts[0]))
    return sorted(((statistics.median(v) / 1000, k) for k, v in selfs.items()), reverse=True)


def entry_point_scans(root: pathlib.Path = ROOT) -> int:
    """How many entry-point scans ``import functai`` makes: importlib.metadata's, and functai's own
    reader (counted by the entry_points.txt files it opens)."""
    code = (
        "import importlib.metadata, sys\n"
        "calls = []\n"
        "sys.addaudithook(lambda event, args: event == 'open' and str(args[0]).endswith('entry_points.txt')"
        " and calls.append(1))\n"
        "modules = [importlib.metadata]\n"
        "try:\n"
        "    import importlib_metadata\n"
        "    modules.append(importlib_metadata)\n"
        "except ImportError:\n"
        "    pass\n"
        "for m in modules:\n"
        "    real = m.entry_points\n"
        "    m.entry_points = lambda *a, real=real, **k: calls.append(1) or real(*a, **k)\n"
        "import functai\n"
        "print(len(calls))\n"
    )
    return int(subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, check=True,
                              env=_env(root), cwd="/").stdout)


def _ms(samples: list[tuple[float, float]]) -> tuple[float, float]:
    return tuple(statistics.median(t[i] for t in samples) * 1e3 for i in (0, 1))  # type: ignore[return-value]


def main(argv: list[str] | None = None) -> int:
    global PYTHON, BYTECODE
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--before", type=pathlib.Path, help="an older checkout, measured in the same rounds")
    parser.add_argument("--modules", type=int, default=8, help="list this many of functai's slowest modules")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter to time (one whose site-packages preload nothing, e.g. not an "
                             "editable install's: its finder imports pathlib and re at startup)")
    parser.add_argument("--bytecode", type=pathlib.Path, help="keep bytecode here (default: a temporary folder)")
    args = parser.parse_args(argv)
    PYTHON = args.python
    with tempfile.TemporaryDirectory() as scratch:
        BYTECODE = str(args.bytecode or scratch)
        roots = {**({"before": args.before} if args.before else {}), "after": ROOT}
        deps = {label: dependencies(root) for label, root in roots.items()}
        jobs = [(label, what, root, statement) for label, root in roots.items()
                for what, statement in (("functai", "import functai"), ("first", FIRST_CALL), ("deps", deps[label]))]
        for _, _, root, statement in jobs:  # bytecode written once, before any timing
            timed(root, statement)
        got: dict[tuple[str, str], list[tuple[float, float]]] = collections.defaultdict(list)
        for round_ in range(args.runs):  # interleaved rounds, the order reversed every other round
            for label, what, root, statement in (jobs if round_ % 2 else jobs[::-1]):
                got[label, what].append(timed(root, statement))
        print(f"median of {args.runs} interleaved rounds, fresh interpreters ({PYTHON}), "
              f"process CPU time (wall):")
        print("| functai | import functai | its dependencies alone | functai's own | import + @ai + first call |")
        print("|---|---|---|---|---|")
        for label, root in roots.items():
            (cpu, wall), (dcpu, dwall), (fcpu, fwall) = (_ms(got[label, what]) for what in ("functai", "deps", "first"))
            print(f"| {label} ({root}) | {cpu:.1f} ms ({wall:.1f}) | {dcpu:.1f} ms ({dwall:.1f}) "
                  f"| {cpu - dcpu:.1f} ms ({wall - dwall:.1f}) | {fcpu:.1f} ms ({fwall:.1f}) |")
        if args.before:
            (cpu, wall), (bcpu, bwall) = _ms(got["after", "functai"]), _ms(got["before", "deps"])
            print(f"after's import over before's dependencies: {cpu / bcpu:.2f}x CPU ({wall / bwall:.2f}x wall)")
        for label, root in roots.items():
            if args.modules:
                slow = own_modules(root, max(5, args.runs // 2))[: args.modules]
                print(f"{label}: slowest functai modules, own time (-X importtime, wall): "
                      + ", ".join(f"{name} {ms:.2f} ms" for ms, name in slow))
            print(f"{label}: entry-point scans during import: {entry_point_scans(root)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
