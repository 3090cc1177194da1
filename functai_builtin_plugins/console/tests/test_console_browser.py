"""The console in a real headless Chromium (Debian's ``chromium``, driven by Playwright): a program's
waiting turn appears in the inbox, a person answers it, the program resumes it. The screenshots in
docs/ are taken here, from the example data: into the test's own folder, and into docs/ with
``FUNCTAI_DOCS_SCREENSHOTS=1`` (so a test run leaves the checkout as it was).

Skipped, with a banner, only when ``/usr/bin/chromium`` or Playwright is missing (``.ci/run``
installs chromium); ``FUNCTAI_REQUIRE_BROWSER=1`` makes that a failure instead. Playwright never
downloads a browser here: it drives the machine's.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import warnings

import console_example
import pytest
from console_helpers import HERE, environment

CHROMIUM = "/usr/bin/chromium"
DOCS = HERE.parents[2] / "docs"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
#: How long a page may take to show what a test waits for (the inbox polls every two seconds).
WAIT_MS = 20_000


def _missing() -> str | None:
    if not os.path.exists(CHROMIUM):
        return f"no {CHROMIUM}: apt-get install -y chromium chromium-driver"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed: pip install playwright (never `playwright install`)"
    return None


@pytest.fixture(scope="module")
def chromium():
    why = _missing()
    if why is not None:
        if os.environ.get("FUNCTAI_REQUIRE_BROWSER"):
            pytest.fail(f"browser tests cannot run: {why} (FUNCTAI_REQUIRE_BROWSER is set)")
        warnings.warn(f"the console's browser tests are skipped: {why}", pytest.PytestWarning)
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture
def person(chromium):
    """A new browser window with its own cookies (another person); all are closed afterwards."""
    opened = []

    def open_window():
        context = chromium.new_context(viewport={"width": 1280, "height": 800})
        opened.append(context)
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        return page

    yield open_window
    for context in opened:
        context.close()


class Program:
    """tests/console_program.py in its own process: it sends a turn that waits, then resumes it
    once a person has answered, and prints what the model was told."""

    def __init__(self, store: str, log: str, conversation: str, amount: int, ledger: pathlib.Path,
                 order: str = "A1") -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "console_program.py"), store, log, conversation, order, str(amount)],
            env=environment(SHOP_LEDGER=str(ledger)), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        assert line.startswith("waiting "), line + self.process.stderr.read()
        self.turn = line.split()[1]

    def finish(self) -> str:
        out, err = self.process.communicate("look\n", timeout=60)
        assert self.process.returncode == 0, err
        return out


def answer_row(page, conversation: str):
    return page.locator(f'#inbox tr[data-key^="{conversation}/"]')


def test_a_program_waits_a_person_approves_an_edit_and_the_program_runs_it_once(tmp_path, console_server, person):
    store = "sqlite:///" + str(tmp_path / "shop.db")
    ledger = tmp_path / "ledger.txt"
    console_example.build(store, store)
    server = console_server(store, "--log", store)
    page = person()
    page.goto(server.url)
    assert page.locator("#count").inner_text() == "1"  # the example's refund waits already

    program = Program(store, store, "ticket-7", 400, ledger)
    row = answer_row(page, "ticket-7")
    row.wait_for()  # appeared without a reload
    assert page.locator("#count").inner_text() == "2"
    assert row.locator('input[name="input.amount"]').input_value() == "400"
    assert "refund" in row.inner_text() and "approval" in row.inner_text()
    row.locator('input[name="input.amount"]').fill("300")
    row.locator('input[name="by"]').fill("ana")
    row.get_by_role("button", name="Approve").click()
    assert "approved by ana with {\"amount\": 300}; waiting for the program to resume" in page.locator(
        "#note").inner_text()

    assert program.finish().strip() == "answer: model saw: refunded 300 on A1"
    assert ledger.read_text() == "A1 300\n"  # once, with the edited input
    row.wait_for(state="detached")  # the resumed turn leaves the inbox


def test_inputs_approved_as_shown_run_as_the_model_asked(tmp_path, console_server, person):
    """A browser drops a text field's line breaks and sends a text area's as CRLF: an input of several
    lines, approved without a change, still runs as the model asked, and no edit is recorded."""
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    ledger = tmp_path / "ledger.txt"
    program = Program(store, log, "ticket-6", 70, ledger, order="A1\nsecond line")
    server = console_server(store, "--log", log)
    page = person()
    page.goto(server.url)
    row = answer_row(page, "ticket-6")
    assert row.locator('textarea[name="input.order"]').input_value() == "A1\nsecond line"
    row.locator('input[name="by"]').fill("ana")
    row.get_by_role("button", name="Approve").click()
    assert "refund approved by ana;" in page.locator("#note").inner_text()  # no "with {...}": nothing was edited
    program.finish()
    assert ledger.read_text() == "A1\nsecond line 70\n"


def test_a_denial_with_a_reason_is_shown_to_the_model(tmp_path, console_server, person):
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    ledger = tmp_path / "ledger.txt"
    program = Program(store, log, "ticket-8", 900, ledger)
    server = console_server(store, "--log", log)
    page = person()
    page.goto(server.url)
    row = answer_row(page, "ticket-8")
    row.locator('input[name="by"]').fill("bo")
    row.locator('input[name="reason"]').fill("refunds over 500 need a receipt")
    row.get_by_role("button", name="Deny").click()
    assert "refund denied by bo" in page.locator("#note").inner_text()
    told = program.finish()
    assert "refunds over 500 need a receipt" in told
    assert not ledger.exists()


def test_two_people_answer_the_same_turn_the_first_holds(tmp_path, console_server, person):
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    program = Program(store, log, "ticket-9", 50, tmp_path / "ledger.txt")
    server = console_server(store, "--log", log)
    ana, bo = person(), person()
    for page in (ana, bo):
        page.goto(server.url)
    answer_row(bo, "ticket-9").locator('input[name="by"]').fill("bo")  # bo is typing: the poll leaves his row
    first = answer_row(ana, "ticket-9")
    first.locator('input[name="by"]').fill("ana")
    first.get_by_role("button", name="Approve").click()
    assert "refund approved by ana" in ana.locator("#note").inner_text()

    second = answer_row(bo, "ticket-9")
    second.locator('input[name="reason"]').fill("too much")
    second.get_by_role("button", name="Deny").click()
    error = bo.locator("#error").inner_text()
    assert "[approval-answered]" in error and "by ana" in error
    assert program.finish().strip() == "answer: model saw: refunded 50 on A1"  # ana's answer held


def test_the_call_page_lists_changes_by_plugin_and_the_tree_shows_a_branch(tmp_path, console_server, person):
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    made = console_example.build(store, log)
    server = console_server("store", "--log", "calls")  # as a person starts it, in the folder that holds both
    page = person()
    page.goto(server.url)
    answer_row(page, "ticket-42").wait_for()
    shots = DOCS if os.environ.get("FUNCTAI_DOCS_SCREENSHOTS") == "1" else tmp_path
    page.screenshot(path=str(shots / "console-inbox.png"))

    page.get_by_role("link", name="Calls").click()
    page.locator(f'a[href="/calls/{made["nested"]}"]').click()
    brief = page.locator('.plugin[data-plugin="brief"]')
    assert "before_call" in brief.inner_text() and "note: house style" in brief.inner_text()
    assert "order_status" in page.locator(".tree").inner_text()  # the nested call
    page.screenshot(path=str(shots / "console-call.png"), full_page=True)

    page.get_by_role("link", name="Conversations").click()
    page.get_by_role("link", name="alex").click()
    fork = page.locator(f'li[data-branches="2"] > #turn-{made["branch_from"]}')
    assert fork.is_visible()
    assert page.locator("li[data-branches] li .turn").count() == 2  # one turn on each branch below it
    page.screenshot(path=str(shots / "console-tree.png"), full_page=True)
    assert all((shots / f"console-{name}.png").stat().st_size > 5_000 for name in ("inbox", "call", "tree"))


def test_a_request_without_the_token_is_refused(tmp_path, console_server, person):
    (tmp_path / "store").mkdir()
    server = console_server(str(tmp_path / "store"))
    page = person()
    for path in ("/", "/calls", "/conversations"):
        response = page.goto(server.base + path)
        assert response.status == 403 and "access token" in page.content()
    response = page.goto(server.url)  # the printed address: its token becomes a cookie
    assert response.status == 200 and page.locator("h1").inner_text() == "Inbox"
    assert "token=" not in page.url
