"""How long ``import functai`` takes, and that it scans no entry points.

Runs ``python -X importtime -c "import functai"`` in fresh interpreters and
reports the median cumulative time of the ``functai`` package (µs → ms).

    python benchmarks/bench_import.py [--runs 21]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def cumulative_ms() -> float:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import functai"], capture_output=True, text=True, check=True,
        cwd=ROOT,
    ).stderr
    for line in out.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2] == "functai":
            return int(parts[1]) / 1000
    raise RuntimeError("functai not in -X importtime output")


def entry_point_scans() -> int:
    code = (
        "import importlib.metadata, sys\n"
        "calls = []\n"
        "sys.addaudithook(lambda event, args: event == 'open' and str(args[0]).endswith('entry_points.txt')"
        " and calls.append(1))\n"  # functai's own reader of the dist-info folders

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
                              cwd=ROOT).stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args(argv)
    times = [cumulative_ms() for _ in range(args.runs)]
    print(f"import functai: median {statistics.median(times):.1f} ms cumulative "
          f"(min {min(times):.1f}, max {max(times):.1f}, {args.runs} fresh interpreters)")
    print(f"entry-point scans during import: {entry_point_scans()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
