"""The first call discovers installed plugins; later calls do not.

Builds two venvs — functai alone, and functai with 20 installed plugin
distributions (each a module with one ``before_call`` hookimpl) — then, in
fresh processes, times ``import functai``, the first call (which scans the
``functai`` entry points and imports the plugins) and the median later call.

    python benchmarks/bench_installed.py [--runs 7]
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
    t0 = time.perf_counter()
    import functai
    from functai.testing import ScriptedLM
    t1 = time.perf_counter()

    @functai.ai
    def answer(question: str) -> str:
        """Answer."""

    functai.configure(client=ScriptedLM(reply=lambda request: "ok"))
    t2 = time.perf_counter()
    value, record = answer.run("q")
    t3 = time.perf_counter()
    later = []
    for _ in range(200):
        s = time.perf_counter()
        answer("q")
        later.append(time.perf_counter() - s)
    later.sort()
    print(json.dumps({"import": t1 - t0, "first": t3 - t2, "later": later[len(later) // 2],
                      "plugins": len(record.changes)}))
''')


def make_venv(where: pathlib.Path, plugins: int) -> pathlib.Path:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    python = where / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "setuptools>=64", "wheel"], check=True)
    subprocess.run([*pip, str(ROOT)], check=True)
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
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        rows = []
        for plugins in (0, 20):
            python = make_venv(pathlib.Path(work) / f"venv{plugins}", plugins)
            runs = [json.loads(subprocess.run([str(python), "-c", PROBE], capture_output=True, text=True,
                                              check=True, cwd=work).stdout) for _ in range(args.runs)]
            assert all(r["plugins"] == plugins for r in runs)
            rows.append((plugins, *(statistics.median(r[k] for r in runs) for k in ("import", "first", "later"))))
    print(f"median of {args.runs} fresh processes per venv:")
    print("| installed plugin distributions | import functai | first call (discovers) | later calls |")
    print("|---|---|---|---|")
    for plugins, imp, first, later in rows:
        print(f"| {plugins} | {imp * 1e3:.0f} ms | {first * 1e3:.1f} ms | {later * 1e6:.0f} µs |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
