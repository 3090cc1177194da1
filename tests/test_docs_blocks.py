"""Every Python block of README.md and docs/*.md runs, offline, as its page is read.

A page's blocks run in order in one namespace, in a fresh subprocess started in an
empty temporary folder, with no ``FUNCTAI_*`` variable and no model key or server in
its environment: what a newcomer gets pasting the page top to bottom into one file.
A block whose first line names a Python file, ``# plugins/spend.py``, is that file's
content: it is written there (so later blocks can load or import it) and run as a
module of its own. A block that cannot run offline says so on its first line,
``# not run: <why>``, and is skipped; `SKIPPED` lists every such block with its reason,
so none is skipped silently (a block marked or unmarked without changing `SKIPPED`
fails the summary). Only a fence of exactly ```` ```python ```` at the start of a line
is run, so any other fence that says Python (```` ```py ````, ```` ```python3 ````,
```` ```pycon ````, an indented or ``~~~`` one) fails the summary too.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
from typing import NamedTuple

import pytest
from checkout import shipped_env

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = ["README.md"] + sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))
NOT_RUN = "# not run:"

#: (page, reason) of every block marked ``# not run: <reason>``, once per block.
SKIPPED: list[tuple[str, str]] = [
    ("docs/stores.md", "needs a PostgreSQL server at db.internal"),
    ("docs/scaling.md", "needs the system database above and a worker on it"),
]

#: Variables a page runs without: functai's own, and every provider's key and server.
CLEARED = re.compile(r"FUNCTAI_|.*_API_KEY$|.*_BASE_URL$|AZURE_OPENAI_|OPENAI_")

_FENCE = r"^```{}[ \t]*\n(.*?)^```[ \t]*$"
_FILE = re.compile(r"# ([\w./-]+\.py)")
#: A fence opening a block in a language starting ``py``/``python``/``ipython``: ``py``, ``python3``, ``pycon``, ``{.python}``…
_PYTHON_LIKE = re.compile(r"^([ \t]*(?:`{3,}|~{3,})[ \t]*\{?\.?(?:i?py|python)[^\n]*)$", re.M | re.I)


class Block(NamedTuple):
    page: str
    line: int  # the first line of code, 1-based
    code: str

    @property
    def skip_reason(self) -> str | None:
        first = self.code.lstrip().split("\n", 1)[0]
        return first[len(NOT_RUN):].strip() if first.startswith(NOT_RUN) else None

    @property
    def file(self) -> str | None:
        """The file the block is the content of, when its first line names one."""
        named = _FILE.fullmatch(self.code.split("\n", 1)[0].strip())
        return named.group(1) if named else None


def blocks(page: str, language: str = "python") -> list[Block]:
    """The page's fenced blocks of ``language``, in order."""
    text = (ROOT / page).read_text()
    fence = re.compile(_FENCE.format(re.escape(language)), re.S | re.M)
    return [Block(page, text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in fence.finditer(text)]


def unrun_python_fences(page: str) -> list[tuple[int, str]]:
    """(line, fence) of each fence that names Python but is not the ```` ```python ```` that `blocks` runs."""
    text = (ROOT / page).read_text()
    return [
        (text.count("\n", 0, m.start()) + 1, m.group(1))
        for m in _PYTHON_LIKE.finditer(text)
        if not re.fullmatch(r"```python[ \t]*", m.group(1))
    ]


def block(page: str, first_line: str, language: str = "python") -> str:
    """The code of the page's block whose first line is ``first_line``."""
    for found in blocks(page, language):
        if found.code.split("\n", 1)[0] == first_line:
            return found.code
    raise AssertionError(f"{page} has no {language} block starting {first_line!r}")


# Run in the child: each block compiled under its page and line, so a traceback points into the page.
_RUNNER = """
import importlib, json, pathlib, sys
page_namespace = {"__name__": "__main__"}
for page, line, file, code in json.load(sys.stdin):
    print(f"--- {page}:{line}", flush=True)
    namespace = page_namespace
    if file:
        path = pathlib.Path(file)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)
        importlib.invalidate_caches()
        namespace = {"__name__": path.stem}
    exec(compile("\\n" * (line - 1) + code, page, "exec"), namespace)
"""


def run_page(page: str, folder: pathlib.Path) -> subprocess.CompletedProcess[str]:
    """Run the page's runnable blocks in order, in a new interpreter working in ``folder``."""
    todo = [(b.page, b.line, b.file, b.code) for b in blocks(page) if b.skip_reason is None]
    env = shipped_env({name: value for name, value in os.environ.items() if not CLEARED.match(name)})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-c", _RUNNER], input=json.dumps(todo), capture_output=True, text=True, cwd=folder,
        env=env, timeout=300,
    )


@pytest.mark.parametrize("page", [p for p in PAGES if any(b.skip_reason is None for b in blocks(p))])
def test_the_python_blocks_of_the_page_run_top_to_bottom(page, tmp_path):
    done = run_page(page, tmp_path)
    assert done.returncode == 0, f"{page}: a block failed\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"


def test_every_block_is_run_or_skipped_with_its_reason_listed(capsys):
    found = [b for page in PAGES for b in blocks(page)]
    skipped = [(b.page, b.skip_reason) for b in found if b.skip_reason is not None]
    with capsys.disabled():
        print(f"\ndocs blocks: {len(found) - len(skipped)} run, {len(skipped)} skipped, on {len(PAGES)} pages")
        for page, reason in skipped:
            print(f"  skipped: {page}: {reason}")
    assert sorted(skipped) == sorted(SKIPPED), "a block's '# not run:' mark and SKIPPED disagree"
    assert all(reason for _, reason in skipped), "a '# not run:' mark says why"
    assert len(found) - len(skipped) > len(skipped)
    unrun = [(page, line, fence) for page in PAGES for line, fence in unrun_python_fences(page)]
    assert not unrun, f"Python blocks that would be neither run nor counted (write ```python at column 0): {unrun}"


def test_a_fence_that_names_python_but_is_not_run_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nx = 1\n```\n\n```python  \nx = 2\n```\n\n```pycon\n>>> 1\n```\n\n```py\nx = 3\n```\n\n"
        "```python3\nx = 4\n```\n\n- a list item:\n\n  ```python\n  x = 5\n  ```\n\n~~~python\nx = 6\n~~~\n\n"
        "```{.python}\nx = 7\n```\n\n````python\nx = 8\n````\n\n```text\npython\n```\n\n```toml\n[python]\n```\n"
    )
    assert [line for line, _ in unrun_python_fences(str(page))] == [9, 13, 17, 23, 27, 31, 35]
    assert [code.strip() for _, _, code in blocks(str(page))] == ["x = 1", "x = 2"]


def test_a_page_runs_in_order_in_a_clean_folder_and_a_failing_block_names_its_line(tmp_path, monkeypatch):
    monkeypatch.setenv("FUNCTAI_LM", "openai/gpt-4.1-mini")  # cleared for the page
    page = tmp_path / "page.md"
    page.write_text(
        "Text.\n\n```python\n# helper/shout.py\ndef shout(text):\n    return text.upper()\n```\n\n"
        "```python\nimport os\nfrom helper.shout import shout\nword = shout('hi')\n```\n\n"
        "```python\n# not run: needs a server\nraise SystemExit(9)\n```\n\n"
        "```python\nassert word == 'HI' and 'FUNCTAI_LM' not in os.environ\nprint(sorted(os.listdir('.')))\n"
        "1 / 0\n```\n"
    )
    found = blocks(str(page))
    assert [(b.line, b.file, b.skip_reason) for b in found] == [
        (4, "helper/shout.py", None), (10, None, None), (16, None, "needs a server"), (21, None, None),
    ]
    folder = tmp_path / "work"
    folder.mkdir()
    done = run_page(str(page), folder)
    assert done.returncode == 1
    assert "['helper']" in done.stdout and (folder / "helper" / "shout.py").is_file()
    assert f'File "{page}", line 23' in done.stderr and "ZeroDivisionError" in done.stderr
