"""The first call discovers installed plugins; later calls do not.

Builds two venvs — functai alone, and functai with 20 installed plugin
distributions (each a module with one ``before_call`` hookimpl) — then, in
fresh processes, times ``import functai``, the first call (which scans the
``functai`` entry points and imports the plugins) and the median later call.

    python benchmarks/bench_installed.py [--runs 7] [--plugins 20] [--root CHECKOUT] [--before CHECKOUT] [--requires]
    python benchmarks/bench_installed.py --scan [--plugins 50]

``--scan`` times only the discovery's read of the ``functai`` entry points in a fresh process:
``importlib.metadata.entry_points(group="functai")`` next to functai's own reader.

``--root`` installs functai from another checkout; ``--before`` adds a second
pair of venvs from an older checkout (a before/after pair on one machine).
``--requires`` makes each plugin declare ``Requires-Dist: functai>=2,<3``, as
a published plugin does (discovery then checks the range). Rounds are
interleaved across all venvs; import and first call are reported as process
CPU time next to wall time (wall time doubles on a loaded machine, CPU time
does not).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import textwrap

ROOT = pathlib.Path(__file__).resolve().parent.parent

PROBE = textwrap.dedent('''
    import json, time
    t0, c0 = time.perf_counter(), time.process_time()
    import functai
    t1, c1 = time.perf_counter(), time.process_time()
    from functai.testing import ScriptedLM

    @functai.ai
    def answer(question: str) -> str:
        """Answer."""

    functai.configure(client=ScriptedLM(reply=lambda request: "ok"))
    t2, c2 = time.perf_counter(), time.process_time()
    value, record = answer.run("q")
    t3, c3 = time.perf_counter(), time.process_time()
    later = []
    for _ in range(200):
        s = time.perf_counter()
        answer("q")
        later.append(time.perf_counter() - s)
    later.sort()
    print(json.dumps({"import": t1 - t0, "import_cpu": c1 - c0, "first": t3 - t2, "first_cpu": c3 - c2,
                      "later": later[len(later) // 2], "plugins": len(record.changes)}))
''')


SCAN = textwrap.dedent('''
    import json, sys, time
    import functai  # as at a first call: functai is imported, and has scanned nothing
    t0, c0 = time.perf_counter(), time.process_time()
    if sys.argv[1] == "importlib.metadata":
        import importlib.metadata
        found = sorted(importlib.metadata.entry_points(group="functai"), key=lambda ep: ep.name)
    else:
        from functai._hooks.entrypoints import entry_points
        found = entry_points("functai")
    print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0, "found": len(found)}))
''')


def scan(python: pathlib.Path, runs: int, plugins: int, work: str) -> None:
    """Median wall and CPU time of each reader's scan, in interleaved fresh processes."""
    got: dict[str, list[dict]] = {"importlib.metadata": [], "functai's reader": []}
    for _ in range(runs):
        for reader, samples in got.items():
            samples.append(json.loads(subprocess.run([str(python), "-c", SCAN, reader], capture_output=True,
                                                     text=True, check=True, cwd=work).stdout))
    print(f"reading the functai entry points with {plugins} plugin distributions installed, median of {runs} "
          "interleaved fresh processes:")
    for reader, samples in got.items():
        assert all(s["found"] == plugins for s in samples)
        print(f"  {reader}: {statistics.median(s['cpu'] for s in samples) * 1e3:.1f} ms CPU, "
              f"{statistics.median(s['wall'] for s in samples) * 1e3:.1f} ms wall")


def make_venv(where: pathlib.Path, plugins: int, root: pathlib.Path = ROOT, requires: bool = False) -> pathlib.Path:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    python = where / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "setuptools>=64", "wheel"], check=True)
    subprocess.run([*pip, str(root)], check=True)
    folders = []
    for i in range(plugins):
        folder = where.parent / f"{where.name}-plugin-{i}"
        folder.mkdir()
        (folder / f"functai_bench_{i}.py").write_text(
            "import functai\n\n@functai.hookimpl\ndef before_call(call):\n"
            f"    return functai.Change(sections=['rule {i}'])\n"
        )
        (folder / "pyproject.toml").write_text(textwrap.dedent(f"""
            [build-system]
            requires = ["setuptools>=64"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "functai-bench-{i}"
            version = "1.0.0"
            {'dependencies = ["functai>=2,<3"]' if requires else ''}

            [tool.setuptools]
            py-modules = ["functai_bench_{i}"]

            [project.entry-points.functai]
            bench-{i} = "functai_bench_{i}"
        """))
        folders.append(str(folder))
    if folders:
        subprocess.run([*pip, "--no-build-isolation", *folders], check=True)
    return python


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--root", type=pathlib.Path, default=ROOT, help="the functai checkout to install")
    parser.add_argument("--before", type=pathlib.Path, help="an older checkout, measured alongside")
    parser.add_argument("--requires", action="store_true", help="plugins declare Requires-Dist: functai>=2,<3")
    parser.add_argument("--plugins", type=int, default=20, help="plugin distributions in the venv that has them")
    parser.add_argument("--scan", action="store_true", help="time only the entry-point read, both ways")
    args = parser.parse_args(argv)
    if args.scan:
        with tempfile.TemporaryDirectory() as work:
            scan(make_venv(pathlib.Path(work) / "scan", args.plugins, args.root, args.requires), args.runs,
                 args.plugins, work)
        return 0
    roots = {"after": args.root, **({"before": args.before} if args.before else {})}
    with tempfile.TemporaryDirectory() as work:
        venvs = {(label, plugins): make_venv(pathlib.Path(work) / f"{label}{plugins}", plugins, root, args.requires)
                 for label, root in roots.items() for plugins in (0, args.plugins)}
        runs: dict[tuple[str, int], list[dict]] = {key: [] for key in venvs}
        for _ in range(args.runs):  # interleaved rounds
            for key, python in venvs.items():
                runs[key].append(json.loads(subprocess.run(
                    [str(python), "-c", PROBE], capture_output=True, text=True, check=True, cwd=work).stdout))
    print(f"median of {args.runs} interleaved fresh processes per venv"
          f"{' (plugins declare functai>=2,<3)' if args.requires else ''}:")
    print("| functai | installed plugin distributions | import functai, CPU | wall "
          "| first call (discovers), CPU | wall | later calls |")
    print("|---|---|---|---|---|---|---|")
    for (label, plugins), got in sorted(runs.items(), key=lambda item: (item[0][0] != "before", item[0][1])):
        assert all(r["plugins"] == plugins for r in got)
        imp, imp_cpu, first, cpu, later = (statistics.median(r[k] for r in got)
                                           for k in ("import", "import_cpu", "first", "first_cpu", "later"))
        print(f"| {label} ({roots[label]}) | {plugins} | {imp_cpu * 1e3:.1f} ms | {imp * 1e3:.1f} ms "
              f"| {cpu * 1e3:.1f} ms | {first * 1e3:.1f} ms | {later * 1e6:.0f} µs |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
