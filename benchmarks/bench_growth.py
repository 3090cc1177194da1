"""Costs that must not grow with history, at ×1, ×10, ×100 and ×1000 of it.

``calllog``: the console's call list and call pages (in a process of their own, with its peak RSS),
``functai calls`` and ``functai show ID`` (process start included), on a folder log and a SQLite
log of 100 to 100,000 calls. ``budget``: a turn with ``budget(per="conversation")`` at turn 5 to
5,000, and 5,000 turns with and without it. ``opening``: a conversation of 5 to 5,000 turns
opened from a folder and from a SQLite store. Medians of rounds (interleaved where two things
are compared), process CPU time next to wall time.

    python benchmarks/bench_growth.py calllog|budget|opening|all [--rounds 7] [--scale 1000]

``--scale`` is the largest multiple (the growth runs ×1, ×10, … up to it).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))



def timed(fn: Callable[[], Any]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def median(samples: list[tuple[float, float]], scale: float = 1e3) -> tuple[float, float]:
    """(wall, CPU) medians times ``scale`` (milliseconds by default)."""
    return statistics.median(s[0] for s in samples) * scale, statistics.median(s[1] for s in samples) * scale


def shown(pair: tuple[float, float]) -> str:
    return f"{pair[0]:.1f} ({pair[1]:.1f} CPU)"


def ratio(at: tuple[float, float], base: tuple[float, float]) -> str:
    return f"{at[0] / base[0]:.2f}×"


# -- call logs ------------------------------------------------------------------------------------


def templates(work: str) -> list[dict[str, Any]]:
    """Varied call records, made by functai: plain, changed by a plugin, failed, nested in a tool."""
    import functai
    from functai.testing import ScriptedLM, tool_call

    class Brief:
        """Adds a rule."""

        name, version = "brief", "1.0.0"

        @functai.hookimpl
        def before_call(self, call: Any) -> Any:
            return functai.Change(sections=("Be brief.",))

    @functai.ai
    def inner(text: str) -> str:
        """Shorten the text."""
        raise NotImplementedError

    @functai.tool
    def shorten(text: str) -> str:
        """Shorten a text."""
        return inner(text)

    @functai.ai(tools=[shorten])
    def outer(text: str) -> str:
        """Answer, using shorten."""
        raise NotImplementedError

    def reply(request: Any) -> str:
        if "fail" in request.messages[-1]["content"]:
            raise functai.ModelError("refused", code="model-refused")
        return "ok " + request.messages[-1]["content"][-20:]

    folder = os.path.join(work, "templates")
    with functai.settings(client=ScriptedLM(reply=reply), log_calls=folder):
        for i in range(5):
            inner(f"a plain question, number {i}")
        with functai.settings(plugins=[Brief()]):
            inner("a briefed one")
        try:
            inner("fail, please")
        except functai.FunctAIError:
            pass
        with functai.settings(client=ScriptedLM([tool_call("shorten", {"text": "a long text"}), "short", "done"])):
            outer("nested")
    return [json.loads(line) for line in open(os.path.join(folder, "calls.jsonl"), encoding="utf-8")]


def make_log(folder: str, records: list[dict[str, Any]], size: int) -> str:
    """A folder log of ``size`` calls, the templates over and over with ids and times of their own
    (one call in a hundred rated); returns a nested call's id."""
    os.makedirs(folder)
    nested = ""
    with open(os.path.join(folder, "calls.jsonl"), "w", encoding="utf-8") as calls, \
            open(os.path.join(folder, "ratings.jsonl"), "w", encoding="utf-8") as ratings:
        for n in range(size):
            template = records[n % len(records)]
            cycle = n - n % len(records)  # the templates' calls, again, with ids of their own
            ids = {r["id"]: f"{cycle + k:016x}" for k, r in enumerate(records)}
            new = ids[template["id"]]
            seconds = 1_700_000_000 + n
            started = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{n % 1000:03d}+00:00"
            data = {**template, "id": new, "started": started,
                    "parent": ids.get(template["parent"]) if template.get("parent") else None}
            if data["parent"]:
                nested = data["parent"]
            calls.write(json.dumps(data, ensure_ascii=False) + "\n")
            if n % 100 == 0:
                ratings.write(json.dumps({"call": new, "good": n % 200 == 0, "correction": None, "by": "ann",
                                          "at": started}) + "\n")
    return nested


CONSOLE = """
import asyncio, json, resource, sys, time
sys.path.insert(0, {here!r})
from bench_growth import console_pages
print(json.dumps(console_pages(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
"""


def console_pages(log: str, call: str, rounds: int) -> dict[str, Any]:
    """In a console process of its own: its first call list, then rounds of the list, a filtered
    list, the next page and a call's page (with its nested calls); its peak RSS (which counts what
    its parent held when it started it: the parent holds little)."""
    from bench_console import TOKEN, _request
    from functai_console import Console, make_app

    empty = tempfile.mkdtemp()
    app = make_app(Console(empty, log=log), TOKEN)

    def get(path: str) -> str:
        status, text = asyncio.run(_request(app, path))
        assert status == 200, f"{path}: {status} {text[:300]}"
        return text

    first = timed(lambda: get("/calls"))
    page = get("/calls")
    older = page.split('rel="next" href="')[1].split('"')[0].replace("&amp;", "&") if 'rel="next"' in page else ""
    paths = {"list": "/calls", "filtered": "/calls?function=inner&error=any", "call": f"/calls/{call}"}
    if older:
        paths["next page"] = older
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in paths}
    for _ in range(rounds):
        for name, path in paths.items():
            samples[name].append(timed(lambda path=path: get(path)))  # type: ignore[misc]
    assert "Nested calls" in get(f"/calls/{call}")
    shutil.rmtree(empty)
    return {"first": median([first]), **{name: median(s) for name, s in samples.items()},
            "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def command(argv: list[str], rounds: int) -> tuple[float, float]:
    """Median wall ms of a ``functai`` command in a new process (children's CPU next to it)."""
    samples = []
    for _ in range(rounds):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "functai", *argv], capture_output=True, text=True)
        took = time.perf_counter() - wall
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        assert done.returncode == 0, done.stderr
        samples.append((took, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime))
    return median(samples)


def calllog(args: argparse.Namespace) -> None:
    work = tempfile.mkdtemp()
    try:
        records = templates(work)
        sizes = [100 * 10 ** k for k in range(len(str(args.scale)))]
        rows: dict[str, dict[int, dict[str, Any]]] = {"folder": {}, "sqlite": {}}
        for size in sizes:
            folder = os.path.join(work, f"log{size}")
            nested = make_log(folder, records, size)
            sqlite = "sqlite:///" + os.path.join(work, f"log{size}.db")
            copied = subprocess.run([sys.executable, "-m", "functai", "calls", "copy", folder, sqlite],
                                    capture_output=True, text=True)  # in a process of its own: see `console_pages`
            assert copied.returncode == 0, copied.stderr
            for kind, log in (("folder", folder), ("sqlite", sqlite)):
                code = CONSOLE.format(here=HERE)
                done = subprocess.run([sys.executable, "-c", code, log, nested, str(args.rounds)],
                                      capture_output=True, text=True)
                assert done.returncode == 0, done.stderr
                found = json.loads(done.stdout.splitlines()[-1])
                found["calls"] = command(["calls", log], args.rounds)
                found["show"] = command(["show", nested, "--log", log], args.rounds)
                rows[kind][size] = found
                print(f"{kind} {size:>7,}: first list {shown(found['first'])} ms; "
                      f"list {shown(found['list'])}, filtered {shown(found['filtered'])}, "
                      f"call {shown(found['call'])} ms; RSS {found['rss']:.0f} MB; "
                      f"functai calls {shown(found['calls'])}, show {shown(found['show'])} ms", flush=True)
        for kind, by_size in rows.items():
            base = by_size[sizes[0] * 10 if len(sizes) > 1 else sizes[0]]
            top = by_size[sizes[-1]]
            print(f"{kind}: at {sizes[-1]:,} against 1,000: " + ", ".join(
                f"{name} {ratio(top[name], base[name])}" for name in ("list", "filtered", "call", "calls", "show")))
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- budgets --------------------------------------------------------------------------------------


def budget(args: argparse.Namespace) -> None:
    import functai
    from functai.testing import ScriptedLM
    from functai_budget import budget as make_budget

    @functai.ai
    def assistant(question: str) -> str:
        """Answer."""
        raise NotImplementedError

    turns = 5 * args.scale
    marks = [5 * 10 ** k for k in range(len(str(args.scale)))]
    work = tempfile.mkdtemp()
    try:
        def run(plugins: list[Any], name: str) -> list[tuple[float, float]]:
            chat = assistant.conversation(name, store=os.path.join(work, name), plugins=plugins,
                                          client=ScriptedLM(reply=lambda request: "ok"),
                                          context=functai.last_turns(0))
            return [timed(lambda n=n: chat(f"question {n}")) for n in range(turns)]  # type: ignore[misc]

        totals: dict[str, list[float]] = {"with": [], "without": []}
        per_turn: list[list[tuple[float, float]]] = []
        for round_ in range(args.budget_rounds):
            for kind in ("with", "without"):
                plugins = [make_budget(tokens=1e12, per="conversation")] if kind == "with" else []
                samples = run(plugins, f"{kind}{round_}")
                totals[kind].append(sum(s[0] for s in samples))
                if kind == "with":
                    per_turn.append(samples)
        print(f"a turn with budget(per='conversation'), folder store, median of turns around each mark "
              f"over {args.budget_rounds} runs (ms):")
        base = None
        for mark in marks:
            window = [s for samples in per_turn for s in samples[max(0, mark - 10):mark + 10]]
            at = median(window)
            base = base or at
            print(f"  turn {mark:>5,}: {shown(at)}  {ratio(at, base)}")
        with_, without = statistics.median(totals["with"]), statistics.median(totals["without"])
        print(f"{turns:,} turns: with the budget {with_:.2f} s, without {without:.2f} s: {with_ / without:.2f}×")
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- opening --------------------------------------------------------------------------------------


def opening(args: argparse.Namespace) -> None:
    import functai
    from functai._stores import FolderStore, MemoryStore, open_store
    from functai._stores.opening import forget
    from functai.testing import ScriptedLM

    @functai.ai
    def tutor(question: str) -> str:
        """Answer."""
        raise NotImplementedError

    functai.configure(client=ScriptedLM(reply=lambda request: "ok"))
    work = tempfile.mkdtemp()
    try:
        memory = MemoryStore()
        print("ms to open a conversation and read its head, a new store object each time (as a new process):")
        for size in [5 * 10 ** k for k in range(len(str(args.scale)))]:
            chat = tutor.conversation(f"c{size}", store=memory, context=functai.last_turns(1))
            for n in range(size):
                chat(f"q{n}")
            records = memory.read(chat.id)
            folder, sqlite = os.path.join(work, f"f{size}"), "sqlite:///" + os.path.join(work, f"s{size}.db")
            for url in (folder, sqlite):
                open_store(url).append("big", records)

            def open_folder(folder: str = folder) -> Any:
                return tutor.conversation("big", store=FolderStore(folder), context=functai.last_turns(4)).head

            def open_sqlite(sqlite: str = sqlite) -> Any:
                forget(sqlite)
                return tutor.conversation("big", store=sqlite, context=functai.last_turns(4)).head

            samples: dict[str, list[tuple[float, float]]] = {"folder": [], "sqlite": []}
            for _ in range(args.rounds):
                for kind, open_ in (("folder", open_folder), ("sqlite", open_sqlite)):
                    gc.collect()  # the garbage of the open before is not this one's to collect
                    samples[kind].append(timed(open_))
            folder_ms, sqlite_ms = median(samples["folder"]), median(samples["sqlite"])
            print(f"  {size:>5,} turns: folder {shown(folder_ms)}, SQLite {shown(sqlite_ms)}: "
                  f"SQLite {sqlite_ms[0] / folder_ms[0]:.2f}× (CPU {sqlite_ms[1] / folder_ms[1]:.2f}×)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["calllog", "budget", "opening", "all"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--budget-rounds", type=int, default=3)
    parser.add_argument("--scale", type=int, default=1000, choices=[1, 10, 100, 1000])
    args = parser.parse_args()
    for name, run in (("calllog", calllog), ("budget", budget), ("opening", opening)):
        if args.what in (name, "all"):
            run(args)


if __name__ == "__main__":
    main()
