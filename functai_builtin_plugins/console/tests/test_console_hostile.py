"""The console cannot be broken from the data it shows or the requests it gets: a conversation
another program wrote, a form too large, a redirect to another site, a Host header naming a
rebound DNS name, ids that differ only in punctuation, inputs a form field would change."""

from __future__ import annotations

import html
import http.client
import os
import re
import shutil

import pytest
import sqlite3
from urllib.parse import urlsplit

import functai
from console_helpers import TOKEN
from starlette.testclient import TestClient
from test_console_routes import client, post, waiting_turn

from functai_console import Console, make_app
from functai_console.security import MAX_FORM, csrf_token


def _foreign_conversation(store: str) -> None:
    """What another program may leave in a store: an id outside functai's rules, or (in a folder) a
    folder where a conversation's file should be."""
    row = ('{"kind": "turn"}',)
    if store.startswith("sqlite:///"):
        with sqlite3.connect(store[len("sqlite:///"):]) as db:
            db.execute("INSERT INTO functai_records (conversation, position, data) VALUES ('../not an id', 0, ?)", row)
    elif store.startswith("postgresql"):
        import psycopg

        with psycopg.connect(store, autocommit=True) as db:
            db.execute("INSERT INTO functai_records (conversation, position, data) VALUES ('../not an id', 0, %s)",
                       row)
    else:
        os.mkdir(os.path.join(store, "broken.jsonl"))


def test_a_conversation_another_program_wrote_is_unreadable_and_the_rest_works(store):
    chat, turn, _ = waiting_turn(*store)
    _foreign_conversation(store[0])
    browser = client(*store)
    inbox = browser.get("/")
    assert inbox.status_code == 200 and "cannot be read" in inbox.text
    assert f'data-key="ticket-1/{turn.id}/' in inbox.text  # the readable one is still there to answer
    listing = browser.get("/conversations")
    assert listing.status_code == 200 and "unreadable" in listing.text and "ticket-1" in listing.text
    page = post(browser, "/inbox/answer", conversation="ticket-1", turn=turn.id, key=turn.approvals[0]["key"],
                by="ana", action="approve")
    assert "refund approved by ana" in page
    bad = "broken" if "://" not in store[0] else "..%2Fnot%20an%20id"
    assert browser.get(f"/conversations/{bad}").status_code in (404, 422)


def test_a_form_too_large_is_refused_413_and_nothing_is_recorded(tmp_path):
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    chat, turn, _ = waiting_turn(store, log)
    browser = client(store, log)
    fields = {"csrf": csrf_token(TOKEN), "conversation": "ticket-1", "turn": turn.id, "key": turn.approvals[0]["key"],
              "by": "ana", "action": "approve", "input.amount": "9" * (MAX_FORM + 1)}
    assert browser.post("/inbox/answer", data=fields).status_code == 413
    assert browser.post("/inbox/answer", data=fields, files={"x": ("x", b"y")}).status_code == 413  # multipart too
    assert chat.turn(turn.id).answers == {}


def test_the_redirect_after_the_token_stays_on_this_console(tmp_path):
    stranger = TestClient(make_app(Console(str(tmp_path / "store")), TOKEN), follow_redirects=False)
    for path in ("//evil.example/x", "/\\evil.example", "///evil.example", "/%2F%2Fevil.example"):
        moved = stranger.get(f"{path}?token={TOKEN}")
        location = moved.headers["location"]
        assert moved.status_code == 303 and location.startswith("/") and not location.startswith(("//", "/\\"))
        assert urlsplit(location).netloc == ""


def test_a_host_header_that_is_not_the_consoles_address_is_refused(tmp_path, console_server):
    (tmp_path / "store").mkdir()
    server = console_server(str(tmp_path / "store"))
    address = urlsplit(server.base)

    def get(host: str) -> int:
        connection = http.client.HTTPConnection(address.hostname, address.port, timeout=10)
        connection.request("GET", f"/?token={TOKEN}", headers={"Host": host})
        status = connection.getresponse().status
        connection.close()
        return status

    port = address.port
    assert get(f"127.0.0.1:{port}") in (303, 403) and get(f"localhost:{port}") in (303, 403)
    assert get(f"rebound.evil.example:{port}") == 403
    token = server.url.split("token=")[1]
    connection = http.client.HTTPConnection(address.hostname, port, timeout=10)
    connection.request("GET", f"/?token={token}", headers={"Host": f"127.0.0.1:{port}"})
    assert connection.getresponse().status == 303
    connection = http.client.HTTPConnection(address.hostname, port, timeout=10)
    connection.request("GET", f"/?token={token}", headers={"Host": f"attacker.example:{port}"})
    answer = connection.getresponse()
    assert answer.status == 403 and b"Host" in answer.read()


def test_rows_whose_ids_differ_only_in_punctuation_have_forms_of_their_own(tmp_path):
    """A field names its form by id, and a browser gives it to the first form of that id: two rows'
    forms sharing one would send one row's inputs with the other's approval."""
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    waiting_turn(store, log)
    shutil.copy(os.path.join(store, "ticket-1.jsonl"), os.path.join(store, "ticket.1.jsonl"))  # same turn, same key
    rows = client(store, log).get("/inbox/rows").text
    forms = re.findall(r'<form method="post" action="/inbox/answer" id="([^"]+)"', rows)
    assert len(forms) == 2 and len(set(forms)) == 2
    for row in re.findall(r"<tr .*?</tr>", rows, re.S):
        own = re.search(r' id="(f-[^"]+)"', row).group(1)
        assert set(re.findall(r' form="([^"]+)"', row)) == {own}  # each field is its own row's


def test_an_input_approved_as_shown_is_no_edit_whatever_a_field_does_to_it(tmp_path):
    """Text of several lines is shown in a text area (a text field drops line breaks) and comes back
    with CRLF line ends, as a browser sends a text area; text reading ``NaN`` stays text."""
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    for n, order in enumerate(["A1\nsecond line", "NaN", "\nstarts with a line break"]):
        chat, turn, _ = waiting_turn(store, log, order=order)
        browser = client(store, log)
        rows = browser.get("/inbox/rows").text
        shown = re.search(r'name="input.order"( rows="3">\n(.*?)</textarea>| value="([^"]*)")', rows, re.S)
        assert shown is not None, rows
        text = html.unescape(shown.group(2) if shown.group(2) is not None else shown.group(3))
        assert text == order and (shown.group(2) is not None) == ("\n" in order)
        key = turn.approvals[0]["key"]
        page = post(browser, "/inbox/answer", conversation="ticket-1", turn=turn.id, key=key, by="ana",
                    action="approve", **{"input.order": text.replace("\n", "\r\n"), "input.amount": "400"})
        assert "refund approved by ana;" in page, page  # no "with {...}": nothing was edited
        answer = chat.turn(turn.id).waits[-1]["answers"][key]
        assert answer["allow"] and not answer.get("inputs")
        chat.turn(turn.id).abandon()


def test_a_filter_the_log_cannot_be_read_by_is_named_on_the_page(tmp_path):
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    waiting_turn(store, log)
    browser = client(store, log)
    for query in ("date=garbage", "date=2026-12", "function=a%00b"):
        page = browser.get(f"/calls?{query}")
        assert page.status_code == 400 and "[bad-filter]" in page.text and 'action="/calls"' in page.text, query
    assert browser.get("/calls?date=2026-12-07").status_code == 200


def test_only_the_consoles_own_script_may_run(tmp_path):
    """The policy names the inbox's one script by its hash: no other inline script runs, so text that
    slipped past escaping could not act (the browser tests show the poll itself still runs)."""
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    waiting_turn(store, log)
    page = client(store, log).get("/")
    policy = page.headers["content-security-policy"]
    script = re.search(r"script-src ([^;]+);", policy).group(1)
    assert "unsafe-inline" not in script and script.startswith("'sha256-")
    assert page.text.count("<script>") == 1


def test_an_edit_typed_over_lines_is_recorded_with_the_line_ends_typed(tmp_path, monkeypatch):
    """A browser sends a text area's line ends as CRLF: the person typed LF, and that is what runs."""
    monkeypatch.setenv("SHOP_LEDGER", str(tmp_path / "ledger.txt"))
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    chat, turn, _ = waiting_turn(store, log)
    key = turn.approvals[0]["key"]
    post(client(store, log), "/inbox/answer", conversation="ticket-1", turn=turn.id, key=key, by="ana",
         action="approve", **{"input.order": "B2\r\nfragile", "input.amount": "400"})
    assert chat.turn(turn.id).waits[-1]["answers"][key]["inputs"] == {"order": "B2\nfragile"}


def logged_call(tmp_path, monkeypatch) -> tuple[str, str]:
    """A store and a call log holding one turn's call, done."""
    monkeypatch.setenv("SHOP_LEDGER", str(tmp_path / "ledger.txt"))
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    chat, turn, _ = waiting_turn(store, log)
    turn.approve(by="ana")
    assert turn.resume() == "done"
    return store, log


def test_calls_a_hand_edited_log_makes_each_others_parents_are_shown_once(tmp_path, monkeypatch):
    """Two calls naming each other as parent (or one itself): the call's page ends, each shown once."""
    import json
    import pathlib

    store, where = logged_call(tmp_path, monkeypatch)
    log = pathlib.Path(where)
    [line] = (log / "calls.jsonl").read_text().splitlines()[:1]
    first = json.loads(line)
    looped = [{**first, "id": "a" * 16, "parent": "b" * 16}, {**first, "id": "b" * 16, "parent": "a" * 16},
              {**first, "id": "c" * 16, "parent": "c" * 16}]
    with open(log / "calls.jsonl", "a") as out:
        out.writelines(json.dumps(record) + "\n" for record in looped)
    browser = client(store, str(log))
    for call in ("a" * 16, "c" * 16):
        page = browser.get(f"/calls/{call}")
        assert page.status_code == 200 and page.text.count('href="/calls/') <= 4  # its parent and child once


def test_a_store_url_is_shown_without_a_password_in_its_query(tmp_path):
    console = Console(str(tmp_path / "store"), log="postgresql://app@db.internal/shop?password=hunter2-SECRET")
    assert "hunter2" not in console.log_where and console.log_where == "postgresql://app@db.internal/shop"


def test_enter_in_the_rating_form_submits_nothing(tmp_path, monkeypatch):
    """Its default button is a disabled one: Enter in the correction field rates nothing."""
    store, log = logged_call(tmp_path, monkeypatch)
    call = next(functai.read_calls(log)).id
    page = client(store, log).get(f"/calls/{call}").text
    form = page[page.index('action="/calls/'):]
    assert form.index("<button type=\"submit\" disabled") < form.index('name="good"')


@pytest.mark.parametrize("edit", ["wait at without offset", "wait at a number", "input a list", "input missing"])
def test_a_waiting_turn_edited_by_hand_breaks_no_page(tmp_path, edit):
    """functai still reads the turn as waiting: the inbox, and the conversation's page, still answer."""
    import json
    import pathlib

    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    chat, turn, _ = waiting_turn(store, log)
    path = pathlib.Path(store) / "ticket-1.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for record in records:
        if record.get("kind") == "wait":
            if edit.startswith("wait at"):
                record["at"] = "2026-12-08T00:24:32" if edit.endswith("offset") else 1796689472
            for approval in record["approvals"]:
                if edit.startswith("input"):
                    approval.pop("digest", None)  # the older format, whose input no digest holds to
                    if edit.endswith("list"):
                        approval["input"] = ["A1"]
                    else:
                        approval.pop("input", None)
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    browser = client(store, log)
    for page in ("/", "/inbox/rows", "/conversations", "/conversations/ticket-1"):
        answer = browser.get(page)
        assert answer.status_code == 200, (page, answer.text[-600:])
