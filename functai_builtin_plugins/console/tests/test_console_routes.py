"""The console's routes through Starlette's TestClient, over a folder, SQLite and PostgreSQL store:
the token and CSRF gate, the inbox and its answers, the call browser, the conversation tree."""

from __future__ import annotations

import io
import re

import console_example
import console_shop
import pytest
from console_helpers import TOKEN
from starlette.testclient import TestClient

import functai
from functai._cli import main
from functai._stores.opening import forget
from functai.testing import ScriptedLM, tool_call
from functai_console import Console, make_app
from functai_console.security import csrf_token


def client(store: str, log: str | None, **options) -> TestClient:
    browser = TestClient(make_app(Console(store, log=log, **options), TOKEN), follow_redirects=False)
    assert browser.get(f"/?token={TOKEN}").status_code == 303  # sets the cookie
    return browser


def post(browser: TestClient, path: str, **fields) -> str:
    """Post a form as the page would; the text of the page it leads to."""
    answer = browser.post(path, data={"csrf": csrf_token(TOKEN), **fields})
    assert answer.status_code == 303, answer.text
    return browser.get(answer.headers["location"]).text


def waiting_turn(store: str, log: str, amount: int = 400, order: str = "A1"):
    """A program's turn that waits for a refund's approval; the program's view of it."""
    seen = []

    def reply(request):
        results = [m for m in request.messages if m.get("role") == "tool"]
        if not results:
            return tool_call("refund", {"order": order, "amount": amount})
        seen.append(results[-1].get("content"))
        return "done"

    functai.configure(client=ScriptedLM(reply=reply), log_calls=log)
    chat = console_shop.support.conversation("ticket-1", store=store, approve="changes")
    with pytest.raises(functai.Waiting) as waiting:
        chat("Refund order A1")
    return chat, waiting.value.turn, seen


def test_every_request_needs_the_token(tmp_path):
    app = make_app(Console(str(tmp_path / "store")), TOKEN)
    stranger = TestClient(app, follow_redirects=False)
    for path in ("/", "/inbox/rows", "/calls", "/calls/x", "/conversations", "/conversations/x"):
        refused = stranger.get(path)
        assert refused.status_code == 403 and "access token" in refused.text
    assert stranger.get("/?token=wrong-token-wrong-token").status_code == 403
    assert stranger.post("/inbox/answer", data={"csrf": csrf_token(TOKEN)}).status_code == 403
    moved = stranger.get(f"/calls?function=support&token={TOKEN}")
    assert moved.status_code == 303 and moved.headers["location"] == "/calls?function=support"  # the token leaves
    cookie = moved.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    page = stranger.get("/")
    assert page.status_code == 200 and TOKEN not in page.text
    assert page.headers["x-frame-options"] == "DENY" and page.headers["referrer-policy"] == "same-origin"


def test_a_form_needs_its_csrf_token_and_this_origin(tmp_path):
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    chat, turn, _ = waiting_turn(store, log)
    browser = client(store, log)
    fields = {"conversation": "ticket-1", "turn": turn.id, "key": turn.approvals[0]["key"], "by": "eve",
              "action": "approve"}
    assert browser.post("/inbox/answer", data=fields).status_code == 403
    assert browser.post("/inbox/answer", data={**fields, "csrf": "0" * 64}).status_code == 403
    other = browser.post("/inbox/answer", data={**fields, "csrf": csrf_token(TOKEN)},
                         headers={"origin": "http://evil.example"})
    assert other.status_code == 403
    assert chat.turn(turn.id).answers == {}  # nothing was recorded


def test_the_inbox_lists_a_waiting_turn_and_an_edited_approval_runs_once_with_the_edit(store, tmp_path, monkeypatch):
    monkeypatch.setenv("SHOP_LEDGER", str(tmp_path / "ledger.txt"))
    chat, turn, seen = waiting_turn(*store)
    browser = client(*store)
    rows = browser.get("/inbox/rows").text
    key = turn.approvals[0]["key"]
    assert f'data-key="ticket-1/{turn.id}/{key}"' in rows
    assert "console_shop:support" in rows and "<b>refund</b>" in rows and "approval" in rows
    assert 'name="input.amount" value="400"' in rows and 'name="input.order" value="A1"' in rows

    page = post(browser, "/inbox/answer", conversation="ticket-1", turn=turn.id, key=key, by="ana",
                action="approve", **{"input.order": "A1", "input.amount": "300"})
    assert 'refund approved by ana with {&quot;amount&quot;: 300}; waiting for the program to resume' in page
    rows = browser.get("/inbox/rows").text
    assert "waiting for the program to resume" in rows
    assert "<td>{&quot;order&quot;: &quot;A1&quot;, &quot;amount&quot;: 300}</td>" in rows  # the input that will run
    tree = browser.get("/conversations/ticket-1").text
    assert "{&quot;order&quot;: &quot;A1&quot;, &quot;amount&quot;: 300} — approved with an edit by ana" in tree
    assert (tmp_path / "ledger.txt").exists() is False  # deciding is not running
    assert chat.turn(turn.id).resume() == "done"
    assert (tmp_path / "ledger.txt").read_text() == "A1 300\n"
    assert seen == ["refunded 300 on A1"]
    assert browser.get("/inbox/rows").text == ""


def test_a_denial_with_a_reason_reaches_the_model_and_a_second_answer_names_the_first(tmp_path):
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    chat, turn, seen = waiting_turn(store, log)
    first, second = client(store, log), client(store, log)
    fields = {"conversation": "ticket-1", "turn": turn.id, "key": turn.approvals[0]["key"]}
    assert "refund denied by bo" in post(first, "/inbox/answer", **fields, by="bo", action="deny",
                                         reason="no receipt attached")
    late = post(second, "/inbox/answer", **fields, by="ana", action="approve")
    assert "[approval-answered]" in late and "by bo" in late
    chat.turn(turn.id).resume()
    assert "no receipt attached" in seen[0]


def test_with_import_the_console_resumes_the_turn_itself(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOP_LEDGER", str(tmp_path / "ledger.txt"))
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    chat, turn, seen = waiting_turn(store, log, amount=25)
    browser = client(store, log, imports=["console_shop"])
    page = post(browser, "/inbox/answer", conversation="ticket-1", turn=turn.id, key=turn.approvals[0]["key"],
                by="ana", action="approve")
    assert "resumed here: &#x27;done&#x27;" in page
    assert (tmp_path / "ledger.txt").read_text() == "A1 25\n"
    assert chat.turn(turn.id).state == "done"


def test_an_answer_needs_a_name(tmp_path):
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    chat, turn, _ = waiting_turn(store, log)
    page = post(client(store, log), "/inbox/answer", conversation="ticket-1", turn=turn.id,
                key=turn.approvals[0]["key"], by=" ", action="approve")
    assert "[console-by]" in page and chat.turn(turn.id).answers == {}


def test_the_call_browser_filters_and_shows_changes_by_plugin(store, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-served-0123456789")
    made = console_example.build(*store)
    browser = client(*store)
    def shown(path):
        return browser.get(path).text.count('<a href="/calls/')

    assert shown("/calls") == 7 and "<p>7 calls (newest first)</p>" in browser.get("/calls").text
    assert shown("/calls?error=model-refused") == 1 and shown("/calls?error=any") == 1
    assert shown("/calls?function=order_status") == 1
    assert shown("/calls?date=1999-01-01") == 0 and shown(f"/calls?date={made['day']}") == 7
    assert shown("/calls?plugin=brief") == 6  # every support call; not order_status
    assert shown("/calls?plugin=bri") == 0  # a plugin's whole name, not a part of it

    page = browser.get(f"/calls/{made['nested']}").text
    assert '<div class="plugin" data-plugin="brief"><b>brief 1.2.0</b><ul><li><code>before_call</code>' in page
    assert "note: house style" in page and "Answer in one sentence." in page
    assert "order_status</a>" in page  # the nested call, in the tree
    private = browser.get(f"/calls/{made['private']}").text
    assert "not recorded (log_content=False)" in private and "4111" not in private
    for path in ("/", "/calls", f"/calls/{made['nested']}", "/conversations", "/conversations/alex"):
        assert "sk-never-served" not in browser.get(path).text


def test_rating_a_call_from_its_page(tmp_path):
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    made = console_example.build(store, log)
    page = post(client(store, log), f"/calls/{made['nested']}/rate", by="ana", good="0", correction="B2 ships today.")
    assert "rated bad by ana" in page and "rated <span class=\"bad\">bad</span> by ana" in page
    [rated] = functai.read_calls(log, rated=True)
    assert (rated.id, rated.rating["good"], rated.rating["by"]) == (made["nested"], False, "ana")


def test_the_conversation_tree_shows_the_branch(store):
    made = console_example.build(*store)
    page = client(*store).get("/conversations/alex").text
    assert "3 turns, 1 where the conversation branches" in page
    assert re.search(rf'<li data-branches="2"><div class="turn" id="turn-{made["branch_from"]}"', page)
    assert "entry notes/mood: calm" in page and "entry notes/customer" in page
    assert "open its call" in page
    listing = client(*store).get("/conversations").text
    assert 'href="/conversations/ticket-42"' in listing and "waiting" in listing


@pytest.mark.parametrize("argv, status, code", [
    (["somewhere", "--host", "0.0.0.0"], 2, "console-token"),  # another address: an explicit token
    (["STORE", "--host", "0.0.0.0", "--token", "short"], 2, "console-token"),
    (["nowhere/"], 2, "not-found"),  # never an empty store made by a typo
    (["sqlite:///nowhere.db"], 2, "not-found"),
    (["STORE", "--import", "no_such_module_here"], 1, "import-failed"),
    (["sqlite:///garbage.db"], 1, "store-io"),  # there, but not a database: said at start, not on every page
])
def test_the_command_refuses_in_one_coded_line(tmp_path, monkeypatch, argv, status, code):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "STORE").mkdir()
    (tmp_path / "garbage.db").write_bytes(b"this is not a database" * 100)
    out, err = io.StringIO(), io.StringIO()
    assert main(["console", *argv], out, err) == status
    assert err.getvalue().startswith(f"functai: error [{code}]: ")
    assert not (tmp_path / "nowhere").exists() and not (tmp_path / "nowhere.db").exists()


def test_what_records_hold_is_shown_as_text_never_as_markup(tmp_path):
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    functai.configure(client=ScriptedLM(["<img src=x onerror=alert(2)>"]), log_calls=log)
    chat = console_shop.support.conversation("xss", store=store)
    chat("<script>alert(1)</script>")
    browser = client(store, log)
    pages = [browser.get("/conversations/xss").text, browser.get(f"/calls/{chat.head.call}").text,
             browser.get("/calls").text]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[0] and "&lt;img src=x" in pages[1]
    for page in pages:
        assert "<script>alert" not in page and "<img src=x" not in page
    assert "[console-form]" in post(browser, "/inbox/answer", by="ana", action="approve")


def test_a_form_that_names_no_button_records_no_answer(tmp_path):
    # Enter in a field submits the form without a button: that must never count as an approval.
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    chat, turn, _ = waiting_turn(store, log)
    page = post(client(store, log), "/inbox/answer", conversation="ticket-1", turn=turn.id,
                key=turn.approvals[0]["key"], by="bob", reason="too much money")
    assert "[console-form]" in page and chat.turn(turn.id).answers == {}
    inbox = client(store, log).get("/").text
    assert '<button type="submit" disabled hidden' in inbox  # the default button: Enter submits nothing


def test_each_tool_call_shows_its_own_approvals(tmp_path):
    # Two refunds in one reply, each approved on its own wait: each shows under its own call.
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")

    def reply(request):
        if any(m.get("role") == "tool" for m in request.messages):
            return "done"
        from functai.testing import tool_calls

        return tool_calls([("refund", {"order": "A1", "amount": 10}), ("refund", {"order": "B2", "amount": 20})])

    functai.configure(client=ScriptedLM(reply=reply), log_calls=log)
    chat = console_shop.support.conversation("two-refunds", store=store, approve="changes")
    with pytest.raises(functai.Waiting) as first:
        chat("Refund both")
    first.value.turn.approve(by="ana")
    with pytest.raises(functai.Waiting) as second:
        first.value.turn.resume()
    second.value.turn.deny(reason="not this one", by="bob")
    assert second.value.turn.resume() == "done"
    [record] = [r for r in functai.read_calls(log) if r.function == "support"]
    page = client(store, log).get(f"/calls/{record.id}").text
    first_call, second_call = page.split("<b>refund</b>")[1:3]
    assert "by ana" in first_call and "bob" not in first_call
    assert "not this one" in second_call and "ana" not in second_call


def test_the_token_may_come_from_the_environment_kept_out_of_the_process_list(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "STORE").mkdir()
    monkeypatch.setenv("FUNCTAI_CONSOLE_TOKEN", "short")
    err = io.StringIO()
    assert main(["console", "STORE", "--host", "0.0.0.0"], io.StringIO(), err) == 2
    assert err.getvalue().startswith("functai: error [console-token]: --token must be at least 16")  # it was read


def test_a_budgets_question_is_answered_with_the_extension_a_person_writes(tmp_path):
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    pytest.importorskip("functai_budget")
    usage = functai.Reply(text="done", finish_reason="stop", usage={"input_tokens": 900, "output_tokens": 100})
    functai.configure(client=ScriptedLM(reply=lambda request: usage), log_calls=log)
    chat = console_shop.support.conversation("ticket-2", store=store,
                                             plugins=[functai.budget(tokens=1500, per="conversation")])
    chat("Where is order A1?")
    with pytest.raises(functai.Waiting) as waiting:
        chat("And order A2?")
    turn = waiting.value.turn
    (question,) = turn.approvals
    browser = client(store, log)
    rows = browser.get("/inbox/rows").text
    assert "<b>before a model request</b>" in rows and "this conversation has used 1,000 tokens" in rows
    assert 'name="input.extend" value="1500"' in rows
    page = post(browser, "/inbox/answer", conversation="ticket-2", turn=turn.id, key=question["key"], by="ana",
                action="approve", **{"input.extend": "500"})
    assert "before a model request approved by ana with 500 more" in page
    assert chat.turn(turn.id).resume() == "done"
    assert [e["data"]["extend"] for e in chat.entries("budget", "extended")] == [{"tokens": 500.0}]
    tree = browser.get("/conversations/ticket-2").text
    assert "this conversation has used 1,000 tokens" in tree and "approved by ana" in tree


def test_an_answer_given_in_the_console_is_heard_by_the_installed_plugins(tmp_path, installed_plugins):
    """``turn_answer`` runs in the console's process, by the plugins installed there: something that
    runs turns on workers is woken whichever process answered."""
    import functai_approval

    heard = []
    ears = functai.Plugin("ears", turn_answer=lambda event: heard.append((event.turn, event.allow, event.by)))
    installed_plugins(functai_approval.plugin, ears)
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    chat, turn, _ = waiting_turn(store, log)
    post(client(store, log), "/inbox/answer", conversation="ticket-1", turn=turn.id, key=turn.approvals[0]["key"],
         by="ana", action="approve")
    assert heard == [(turn.id, True, "ana")]


def test_a_number_typed_into_a_text_input_is_that_text(store, tmp_path, monkeypatch):
    """The tool's order is text: 123 typed in names the order "123" (read as JSON, it was refused)."""
    monkeypatch.setenv("SHOP_LEDGER", str(tmp_path / "ledger.txt"))
    chat, turn, seen = waiting_turn(*store)
    browser = client(*store)
    key = turn.approvals[0]["key"]
    page = post(browser, "/inbox/answer", conversation="ticket-1", turn=turn.id, key=key, by="ana",
                action="approve", **{"input.order": "123", "input.amount": "400"})
    assert "refund approved by ana with {&quot;order&quot;: &quot;123&quot;}" in page
    assert chat.turn(turn.id).resume() == "done"
    assert (tmp_path / "ledger.txt").read_text() == "123 400\n"


def test_true_typed_for_a_number_is_an_edit_refused_not_dropped(tmp_path, monkeypatch):
    """In Python True == 1: compared so, `true` typed over 1 was no edit, and the original ran."""
    monkeypatch.setenv("SHOP_LEDGER", str(tmp_path / "ledger.txt"))
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    chat, turn, _ = waiting_turn(store, log, amount=1)
    page = post(client(store, log), "/inbox/answer", conversation="ticket-1", turn=turn.id,
                key=turn.approvals[0]["key"], by="ana", action="approve", **{"input.amount": "true"})
    assert "[input-invalid]" in page and "must be int" in page
    assert chat.turn(turn.id).state == "waiting" and chat.turn(turn.id).answers == {}


def test_text_a_browser_sends_back_changed_only_in_its_line_ends_is_no_edit(tmp_path, monkeypatch):
    """A browser gives a text area's lone CR back as CRLF, a NUL as U+FFFD: approved as shown, the
    model's input runs as it asked, and no edit is recorded."""
    monkeypatch.setenv("SHOP_LEDGER", str(tmp_path / "ledger.txt"))
    store, log = str(tmp_path / "store"), str(tmp_path / "calls")
    chat, turn, _ = waiting_turn(store, log, order="A1\rB\x00C")
    page = post(client(store, log), "/inbox/answer", conversation="ticket-1", turn=turn.id,
                key=turn.approvals[0]["key"], by="ana", action="approve",
                **{"input.order": "A1\r\nB\ufffdC", "input.amount": "400"})
    assert "refund approved by ana;" in page  # no "with {...}": nothing was edited
    key = turn.approvals[0]["key"]
    assert chat.turn(turn.id).waits[-1]["answers"][key].get("inputs") is None


def test_a_store_that_cannot_be_read_now_is_said_on_the_page(tmp_path):
    """Readable when the console started, then damaged (or its server gone): each page says why."""
    path = tmp_path / "store.db"
    store = "sqlite:///" + str(path)
    functai.configure(client=ScriptedLM(["ok"]))
    waiting_turn(store, str(tmp_path / "calls"))
    browser = client(store, str(tmp_path / "calls"))
    forget(store)
    path.write_bytes(b"this is not a database" * 100)
    for page in ("/", "/conversations", "/conversations/ticket-1"):
        answer = browser.get(page)
        assert answer.status_code == 503 and "[store-io]" in answer.text, (page, answer.text[:300])
