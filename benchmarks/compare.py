"""A checkout against a reference checkout, side by side on one machine in one run.

What a call and each plugin handler cost (a ``Change``, None, the
``CallEvent``), what ``log_calls`` adds, the first call with 0 and 20
installed plugin distributions, opening a 10,000-turn and reopening a
2,000-turn folder conversation, ``import functai``, and 200 concurrent
``acall``s; each next to a pure-Python control loop that shows how fast each
side's processes ran. docs/performance.md gives the figures and how each is made.

    python benchmarks/compare.py --before OLD_CHECKOUT [--after NEW_CHECKOUT] [--rounds 5]
                                 [--only ROW,ROW] [--work DIR] [--python PYTHON] [--list]

Each row's measure (benchmarks/compare_probes.py) runs in fresh processes
with ``PYTHONPATH`` naming one checkout (through a folder that holds only a
link to its ``functai`` package, so neither side sees the other's
``*.egg-info``), alternating before and after in interleaved rounds (which
side goes first alternates too). The table gives the medians of process CPU
time and of wall time for both: on this shared machine trust CPU time.

The interpreters are throw-away venvs made as benchmarks/bench_installed.py
makes them (functai's dependencies and functai, and one with 20 installed
plugin distributions besides); the installed functai is shadowed by the
checkout on ``PYTHONPATH``. ``--python`` runs every row but the first-call
ones in that interpreter instead (quick runs). ``--work`` keeps the venvs
and the written conversations for the next run (delete it when a checkout
changes what it writes).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
PROBES = HERE / "compare_probes.py"


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    probe: str  # the measure that feeds it (one process per side and round)
    value: str  # its figure in that measure's output
    unit: str
    target: str = "—"
    limit: float | None = None
    judge: int = 1  # the time the target is read against: 0 wall, 1 CPU


ROWS = (
    Row("ref", "control: a pure-Python loop, not functai (the same code on both sides)", "calls", "ref", "µs"),
    Row("call", "a call, no plugins (for scale)", "calls", "call", "µs"),
    Row("plugin", "a plugin present whose handlers never run (for scale)", "calls", "plugin", "µs"),
    Row("change", "per handler returning a fresh `Change(sections=[…])`", "calls", "change", "µs", "≤ 1.3 µs", 1.3),
    Row("none", "per handler returning None", "calls", "none", "µs", "≤ 0.3 µs", 0.3),
    Row("event", "`CallEvent` built once any handler exists", "calls", "event", "µs", "≤ 0.5 µs", 0.5),
    Row("log", "`log_calls` per call (over no log)", "calls", "log", "µs", "≤ +6 µs", 6),
    Row("first20", "first call, 20 installed plugin distributions", "first20", "first", "ms", "≤ 12 ms", 12),
    Row("first0", "first call, 0 installed plugin distributions", "first0", "first", "ms", "≤ 3 ms", 3),
    Row("open", "open a 10,000-turn folder-store conversation", "open", "open", "ms", "≤ 100 ms", 100),
    Row("import", "`import functai`", "import", "import", "ms", "≤ 40 ms", 40),
    Row("module", "largest functai-owned module import (self, `-X importtime`)", "import", "module", "ms",
        "≤ 5 ms", 5, judge=0),
    Row("reopen", "reopen a 2,000-turn `all_turns()` conversation", "reopen", "open", "ms", "≤ 60 ms", 60),
    Row("acall", "200 concurrent `acall`s, loopback server answering after 50 ms", "acall", "acall", "s",
        "≤ 0.5 s wall", 0.5, judge=0),
)

DIGITS = {"µs": 2, "ms": 1, "s": 3}

#: Processes per side and round, for the measures whose figures vary most from process to process.
REPEATS = {"calls": 2, "first0": 2, "first20": 2, "import": 2}

#: Conversations written once per side before the rounds: name → (turns, context rule).
CONVERSATIONS = {"open": ("big", 10_000, "last"), "reopen": ("long", 2_000, "all")}


@dataclass
class Side:
    name: str
    checkout: pathlib.Path
    path: pathlib.Path  # what PYTHONPATH names: a folder with a link to the checkout's functai
    folders: dict[str, pathlib.Path] = field(default_factory=dict)  # probe → its written conversation

    def revision(self) -> str:
        def git(*args: str) -> str:
            return subprocess.run(["git", "-C", str(self.checkout), *args], capture_output=True, text=True).stdout
        head = git("rev-parse", "--short", "HEAD").strip() or "no git"
        return head + (" + uncommitted changes" if git("status", "--porcelain", "--", "functai").strip() else "")


class ProbeFailed(Exception):
    pass


class Runner:
    """Runs the measures: which interpreter, which environment, with what arguments."""

    def __init__(self, args: argparse.Namespace, work: pathlib.Path) -> None:
        self.args, self.work, self.pythons = args, work, {}

    def python(self, probe: str) -> str:
        plugins = 20 if probe == "first20" else 0
        if self.args.python and probe not in ("first0", "first20"):
            return self.args.python
        if plugins not in self.pythons:
            self.pythons[plugins] = str(venv(self.work / f"venv{plugins}", plugins, self.args))
        return self.pythons[plugins]

    def argv(self, probe: str, side: Side) -> list[str]:
        a = self.args
        if probe == "calls":
            return ["calls", "--calls", str(a.calls), "--rounds", str(a.call_rounds)]
        if probe in ("first0", "first20"):
            return ["first", "--expect", probe[5:]]
        if probe in CONVERSATIONS:
            name, turns, rule = CONVERSATIONS[probe]
            return ["open", "--folder", str(side.folders[probe]), "--conversation", name, "--turns", str(turns),
                    "--context", rule, "--repeat", "2" if turns > 5000 else "3"]
        return [probe]

    def run(self, probe: str, side: Side, argv: list[str] | None = None) -> dict[str, Any]:
        # Bytecode is written and read as an installed package's is (this machine's environment
        # sets PYTHONDONTWRITEBYTECODE, which would time compiling every module on every import),
        # under the work folder, so that the checkouts are left as they were.
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("FUNCTAI_") and k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
        env["PYTHONPATH"] = str(side.path)
        env["PYTHONPYCACHEPREFIX"] = str(self.work / "bytecode")
        if probe not in ("first0", "first20"):
            env["FUNCTAI_LOAD_PLUGINS"] = ""  # no installed plugin loads where none is measured
        command = [self.python(probe), str(PROBES), *(argv or self.argv(probe, side))]
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=self.work, timeout=1200)
        if done.returncode != 0:
            raise ProbeFailed(f"{probe} on {side.name}: " + (done.stderr.strip().splitlines() or ["?"])[-1])
        found = json.loads(done.stdout.splitlines()[-1])
        if pathlib.Path(found["functai"]) != (side.checkout / "functai").resolve():
            raise ProbeFailed(f"{probe} on {side.name} measured functai from {found['functai']}")
        return found


def venv(where: pathlib.Path, plugins: int, args: argparse.Namespace) -> pathlib.Path:
    """A venv as bench_installed makes it, kept under --work; plus both checkouts' dependencies
    (installed again when they change, as when a checkout gains one)."""
    python = where / "bin" / "python"
    made, wanted = where / ".compare-made", where / ".compare-requirements"
    if not made.exists():
        for stale in [where, *where.parent.glob(f"{where.name}-plugin-*")]:
            shutil.rmtree(stale, ignore_errors=True)
        sys.path.insert(0, str(HERE))
        from bench_installed import make_venv

        print(f"making {where.name}: functai's dependencies and {plugins} plugin distributions", file=sys.stderr)
        python = make_venv(where, plugins)
        made.touch()
    needs = sorted({req for checkout in (args.before, args.after) for req in requirements(checkout)})
    if not wanted.exists() or wanted.read_text() != "\n".join(needs):
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *needs], check=True)
        wanted.write_text("\n".join(needs))
    return python


def requirements(checkout: pathlib.Path) -> list[str]:
    with open(checkout / "pyproject.toml", "rb") as file:
        return list(tomllib.load(file)["project"].get("dependencies", []))


def make_side(name: str, checkout: pathlib.Path, work: pathlib.Path) -> Side:
    if not (checkout / "functai" / "__init__.py").is_file():
        raise SystemExit(f"{checkout} is not a functai checkout (no functai/__init__.py)")
    path = work / f"path-{name}"
    path.mkdir(exist_ok=True)
    link = path / "functai"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(checkout / "functai", target_is_directory=True)
    return Side(name, checkout, path)


def write_conversations(runner: Runner, sides: list[Side], probes: list[str]) -> None:
    """Each side writes its own conversations (its own format), once, with its own code."""
    for probe in probes:
        if probe not in CONVERSATIONS:
            continue
        name, turns, rule = CONVERSATIONS[probe]
        for side in sides:
            folder = runner.work / f"{name}-{side.name}"
            marker = folder.with_suffix(".written")
            if not marker.exists() or marker.read_text() != side.revision():
                shutil.rmtree(folder, ignore_errors=True)
                print(f"writing {turns:,} turns with {side.name}", file=sys.stderr)
                runner.run("build", side, ["build", "--folder", str(folder), "--conversation", name,
                                           "--turns", str(turns), "--context", rule])
                marker.write_text(side.revision())
            side.folders[probe] = folder


def measure(runner: Runner, sides: list[Side], rows: list[Row], rounds: int) -> tuple[dict, dict, list[str]]:
    """Interleaved rounds: every measure, both sides (first side alternating), in each round."""
    probes = list(dict.fromkeys(row.probe for row in rows))
    found: dict[tuple[str, str], list[tuple[float, float | None]]] = {}
    info: dict[tuple[str, str], dict[str, Any]] = {}
    errors: list[str] = []
    for r in range(rounds):
        for probe in probes:
            orders = [sides[::-1] if (r + j) % 2 else sides for j in range(REPEATS.get(probe, 1))]
            for side in [side for order in orders for side in order]:
                started = time.perf_counter()
                try:
                    out = runner.run(probe, side)
                except ProbeFailed as error:
                    errors.append(str(error))
                    continue
                info[probe, side.name] = out.get("info", {})
                for row in rows:
                    if row.probe == probe:
                        found.setdefault((row.key, side.name), []).append(tuple(out["values"][row.value]))
                print(f"round {r + 1}/{rounds}: {probe} on {side.name} ({time.perf_counter() - started:.1f} s)",
                      file=sys.stderr)
    return found, info, list(dict.fromkeys(errors))


def median(values: list[tuple[float, float | None]] | None, i: int) -> float | None:
    picked = [v[i] for v in values or [] if v[i] is not None]
    return statistics.median(picked) if picked else None


def shown(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    return f"{value:.{DIGITS[unit]}f} {unit}"


def table(rows: list[Row], found: dict, sides: list[Side]) -> list[str]:
    lines = ["| measure | before CPU | before wall | after CPU | after wall | after / before | target | met (after)? |",
             "|---|---|---|---|---|---|---|---|"]
    before, after = (side.name for side in sides)
    for row in rows:
        cells = [shown(median(found.get((row.key, name)), i), row.unit) for name in (before, after) for i in (1, 0)]
        old, new = (median(found.get((row.key, name)), row.judge) for name in (before, after))
        if old is None or new is None:  # only wall time exists for this row
            old, new = (median(found.get((row.key, name)), 0) for name in (before, after))
        ratio = f"{new / old:.2f}×" if old and new is not None and old > 0 and new >= 0 else "—"
        met = "—" if row.limit is None or new is None else ("yes" if new <= row.limit else "**no**")
        lines.append(f"| {row.label} | {' | '.join(cells)} | {ratio} | {row.target} | {met} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=pathlib.Path, help="the checkout to compare against")
    parser.add_argument("--after", type=pathlib.Path, default=pathlib.Path("."), help="default: the current folder")
    parser.add_argument("--rounds", type=int, default=5,
                        help="interleaved rounds (each runs every measure in 1 or 2 fresh processes per side)")
    parser.add_argument("--only", action="append", default=[], help="row keys (comma-separated; see --list)")
    parser.add_argument("--calls", type=int, default=500, help="calls per case and round of the per-call rows")
    parser.add_argument("--call-rounds", type=int, default=15, help="rounds inside each per-call process")
    parser.add_argument("--work", type=pathlib.Path, help="keep venvs and written conversations here")
    parser.add_argument("--python", help="run all rows but first0/first20 in this interpreter")
    parser.add_argument("--list", action="store_true", help="list the rows and exit")
    args = parser.parse_args(argv)
    if args.list:
        for row in ROWS:
            print(f"{row.key:8} {row.label}")
        return 0
    if args.before is None:
        parser.error("--before is required")
    keys = {key.strip() for item in args.only for key in item.split(",") if key.strip()}
    unknown = keys - {row.key for row in ROWS}
    if unknown:
        parser.error(f"unknown row {sorted(unknown)[0]!r}; rows: {', '.join(row.key for row in ROWS)}")
    rows = [row for row in ROWS if not keys or row.key in keys]
    args.before, args.after = args.before.resolve(), args.after.resolve()
    work = args.work.resolve() if args.work else pathlib.Path(tempfile.mkdtemp(prefix="functai-compare-"))
    work.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    try:
        runner = Runner(args, work)
        sides = [make_side("before", args.before, work), make_side("after", args.after, work)]
        for side in sides:  # each checkout's bytecode written before anything is timed
            for probe in ("import", *(row.probe for row in rows if row.probe in ("first0", "first20"))):
                runner.run(probe, side)
        write_conversations(runner, sides, [row.probe for row in rows])
        found, info, errors = measure(runner, sides, rows, args.rounds)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    print(f"before: {args.before} ({sides[0].revision()}); after: {args.after} ({sides[1].revision()})")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {load:.1f} at the start and "
          f"{os.getloadavg()[0]:.1f} at the end; medians over {args.rounds} interleaved rounds of fresh processes")
    print()
    print("\n".join(table(rows, found, sides)))
    notes = [f"- {probe} on {side}: {', '.join(f'{k} {v}' for k, v in got.items())}"
             for (probe, side), got in sorted(info.items()) if probe in ("import", "acall")]
    if notes:
        print("\n" + "\n".join(notes))
    for error in errors:
        print(f"- failed: {error}")
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
