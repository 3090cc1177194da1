"""benchmarks/compare.py: the before/after table runs, and its per-call figures are derived right.

No timing is asserted: only that the script measures the checkouts it is
given and that the arithmetic that turns case times into per-handler costs
is the one its docstring states.
"""

import importlib.util
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_per_call_figures_are_slopes_and_intercepts():
    # wall times, cpu times = twice those: a plain call 10, a present plugin +3, the first
    # before_call handler +4 beyond 0.5 per handler, a Change +2 more per handler, the log +7
    def times(plugin, event, per, change, log):
        base = 10
        one = base + plugin + event + per
        quiet = base + plugin + event + 10 * per
        return {"0": base, "idle": base + plugin, "1 none": one, "n none": quiet,
                "n change": quiet + 10 * change, "log": base + log, "ref": 1}

    wall, cpu = times(3, 4, 0.5, 2, 7), times(6, 8, 1.0, 4, 14)
    got = load("compare_probes").derive({k: (wall[k], cpu[k]) for k in wall}, 10)
    assert got == {"call": (10, 10), "plugin": (3, 6), "event": (4, 8), "none": (0.5, 1.0),
                   "change": (2.5, 5.0), "log": (7, 14), "ref": (1, 1)}


def test_compare_runs_cheap_rows_against_the_same_checkout_twice(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "compare.py"), "--before", str(ROOT), "--after", str(ROOT),
         "--rounds", "1", "--only", "call", "--calls", "20", "--call-rounds", "2",
         "--python", sys.executable, "--work", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
        env={k: v for k, v in os.environ.items() if not k.startswith("FUNCTAI_")},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "| measure | before CPU | before wall | after CPU | after wall |" in "\n".join(lines)
    rows = {line.split(" | ")[0].strip("| "): line for line in lines if line.startswith("| ")}
    assert set(rows) == {"measure", "a call, no plugins (for scale)"}
    for label in ["a call, no plugins (for scale)"]:
        cells = rows[label].strip("|").split("|")
        assert all(cell.strip() != "—" for cell in cells[1:5]), rows[label]  # four figures, both sides
    assert "failed" not in done.stdout
