"""How long ``import functai`` takes, how much of it is functai's own, and that it scans no entry points.

In fresh interpreters, interleaved round by round: ``import functai``, and
its dependencies alone — every module outside functai that ``import
functai`` loads (pluggy, attrs and the standard library modules they and
functai use), imported in the same order. The difference is what functai's
own modules cost. Process CPU time next to wall time, medians of the rounds
(wall time doubles on a loaded machine, CPU time does not). ``--before``
adds an older checkout to the same rounds; ``--modules`` lists functai's
slowest modules by their own time (``python -X importtime``, median).

    python benchmarks/bench_import.py [--runs 21] [--before CHECKOUT] [--modules 8]
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

ROOT = pathlib.Path(__file__).resolve().parent.parent

TIMED = ("import time; c, w = time.process_time(), time.perf_counter(); {}; "
         "print(time.process_time() - c, time.perf_counter() - w)")


def _env(root: pathlib.Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


def dependencies(root: pathlib.Path) -> str:
    """``import a; import b; ...``: the modules outside functai that ``import functai`` loads, in order."""
    code = ("import sys; before = set(sys.modules); import functai, json; "
            "print(json.dumps([m for m in sys.modules if m not in before]))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                       env=_env(root), cwd="/").stdout)
    outside = [m for m in loaded if m.partition(".")[0] != "functai" and not m.startswith("_")]
    return "; ".join(f"import {m}" for m in outside) or "pass"


def timed(root: pathlib.Path, statement: str) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", TIMED.format(statement)], capture_output=True, text=True, check=True,
                         env=_env(root), cwd="/").stdout.split()
    return float(out[0]), float(out[1])


def own_modules(root: pathlib.Path, runs: int) -> list[tuple[float, str]]:
    """functai's modules by their own import time (µs → ms), median over ``runs``."""
    selfs: dict[str, list[int]] = collections.defaultdict(list)
    for _ in range(runs):
        err = subprocess.run([sys.executable, "-X", "importtime", "-c", "import functai"], capture_output=True,
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
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env=_env(root), cwd="/").stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--before", type=pathlib.Path, help="an older checkout, measured in the same rounds")
    parser.add_argument("--modules", type=int, default=8, help="list this many of functai's slowest modules")
    args = parser.parse_args(argv)
    roots = {"after": ROOT, **({"before": args.before} if args.before else {})}
    deps = {label: dependencies(root) for label, root in roots.items()}
    got: dict[tuple[str, str], list[tuple[float, float]]] = collections.defaultdict(list)
    for _ in range(args.runs):  # interleaved rounds
        for label, root in roots.items():
            got[label, "functai"].append(timed(root, "import functai"))
            got[label, "deps"].append(timed(root, deps[label]))
    print(f"median of {args.runs} interleaved rounds, fresh interpreters (process CPU time; wall):")
    print("| functai | import functai | its dependencies alone | functai's own |")
    print("|---|---|---|---|")
    for label, root in sorted(roots.items(), key=lambda item: item[0] != "before"):
        cpu, wall = (statistics.median(t[i] for t in got[label, "functai"]) * 1e3 for i in (0, 1))
        dcpu, dwall = (statistics.median(t[i] for t in got[label, "deps"]) * 1e3 for i in (0, 1))
        print(f"| {label} ({root}) | {cpu:.1f} ms ({wall:.1f}) | {dcpu:.1f} ms ({dwall:.1f}) "
              f"| {cpu - dcpu:.1f} ms ({wall - dwall:.1f}) |")
    for label, root in roots.items():
        if args.modules:
            slow = own_modules(root, max(5, args.runs // 2))[: args.modules]
            print(f"{label}: slowest functai modules, own time (-X importtime, wall): "
                  + ", ".join(f"{name} {ms:.2f} ms" for ms, name in slow))
        print(f"{label}: entry-point scans during import: {entry_point_scans(root)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
