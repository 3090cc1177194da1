"""Stream guards (the ``chunk`` hook): what a stream yields is only what every guard released; the
reply's recorded text is the text shown, redactions included; a stop fails the call as a refusal.
The key guard tested here is the one docs/async.md ships, read from the page."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import pathlib
import re

import attrs
import pytest

import functai
from functai import Change, FunctAIError, Plugin, PluginError, Reply, ai, tool
from functai.testing import ScriptedLM, tool_call

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _shipped_guard():
    """The ``redact_keys.py`` block of docs/async.md, as a module."""
    page = (ROOT / "docs" / "async.md").read_text()
    block = next(b for b in re.findall(r"^```python[ \t]*\n(.*?)^```[ \t]*$", page, re.S | re.M)
                 if b.startswith("# redact_keys.py"))
    spec = importlib.util.spec_from_loader("redact_keys_doc", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(block, "docs/async.md", "exec"), module.__dict__)
    return module


redact_keys = _shipped_guard().redact_keys


def _fn(plugins, client):
    @ai(plugins=plugins, client=client)
    def helper(question: str) -> str:
        """Answer the question."""

    return helper


def _stream(fn, *args, mode="sync"):
    """(text events, value, record) of a streamed call, sync or async."""
    if mode == "sync":
        with fn.stream(*args) as stream:
            texts = [e.text for e in stream if e.kind == "text"]
        return texts, stream.value, stream.record

    async def run():
        async with fn.astream(*args) as stream:
            texts = [e.text async for e in stream if e.kind == "text"]
        return texts, stream.value, stream.record

    return asyncio.run(run())


@pytest.fixture(params=["sync", "async"])
def mode(request):
    return request.param


# --- hold and release --------------------------------------------------------------------------

def test_a_guard_holds_text_until_a_sentence_ends(mode):
    sentences = Plugin("sentences", chunk_window=100)
    seen = []

    @sentences.chunk
    def whole_sentences(chunk):
        seen.append((chunk.text, chunk.shown, chunk.final))
        return None if "." in chunk.text or chunk.final else Change(hold=True)

    fn = _fn([sentences], ScriptedLM(["Hello there. How are you."], chunk=4))
    texts, value, record = _stream(fn, "hi", mode=mode)
    assert texts == ["Hello there.", " How are you."]
    assert value == "Hello there. How are you." and record.changes == []  # a hold is not recorded
    assert seen == [("Hell", "", False), ("Hello th", "", False), ("Hello there.", "", False),
                    (" How", "Hello there.", False), (" How are", "Hello there.", False),
                    (" How are you", "Hello there.", False), (" How are you.", "Hello there.", False),
                    ("", "Hello there. How are you.", True)]


def test_past_the_window_the_oldest_text_is_shown(mode):
    always = Plugin("always", chunk_window=5, chunk=lambda chunk: None if chunk.final else Change(hold=True))
    fn = _fn([always], ScriptedLM(["abcdefghijklmnop"], chunk=4))
    texts, value, _ = _stream(fn, "x", mode=mode)
    assert texts == ["abc", "defg", "hijk", "lmnop"]  # 5 held after each piece; the final piece shown whole
    assert value == "abcdefghijklmnop"
    one = Plugin("one", chunk_window=3, chunk=lambda chunk: None if chunk.final else Change(hold=True))
    texts, _, _ = _stream(_fn([one], ScriptedLM(["abcdef"], chunk=1)), "x", mode=mode)
    assert texts == ["a", "b", "c", "def"]  # the first text comes once the window (3) is passed


def test_the_largest_window_of_the_plugins_that_held_applies():
    small = Plugin("small", chunk_window=2, chunk=lambda c: None if c.final else Change(hold=True))
    large = Plugin("large", chunk_window=6, chunk=lambda c: None if c.final or "z" in c.text else Change(hold=True))
    fn = _fn([small, large], ScriptedLM(["abcdefghz123"], chunk=4))
    texts, value, _ = _stream(fn, "x")
    # large holds (window 6) until a "z" comes; then only small holds (window 2)
    assert texts == ["ab", "cdefghz1", "23"]
    assert value == "abcdefghz123"


def test_a_guard_that_returns_nothing_changes_no_event():
    calls = []
    quiet = Plugin("quiet", chunk=lambda chunk: calls.append(chunk.final))
    other = Plugin("other", before_call=lambda call: None)
    texts_guarded, _, record = _stream(_fn([quiet], ScriptedLM(["The answer is 42."], chunk=4)), "q")
    texts_plain, _, plain = _stream(_fn([other], ScriptedLM(["The answer is 42."], chunk=4)), "q")
    assert texts_guarded == texts_plain == ["The ", "answ", "er i", "s 42", "."]
    assert calls == [False] * 5 + [True]
    assert record.changes == plain.changes == []


def test_an_async_def_guard_is_awaited_in_both_streams(mode):
    guard = Plugin("slow", chunk_window=10)

    @guard.chunk
    async def hold_digits(chunk):
        await asyncio.sleep(0)
        if chunk.final:
            return Change(text=chunk.text.replace("7", "#"))
        return Change(hold=True) if chunk.text[-1:].isdigit() else None

    fn = _fn([guard], ScriptedLM(["ab7cd77"], chunk=2))
    texts, value, record = _stream(fn, "x", mode=mode)
    assert texts == ["ab", "7c", "d##"]
    assert value == "ab7cd##" and record.changes[0]["change"] == {"text": "##", "at": [5, 7], "replaced": 2}


# --- redactions ------------------------------------------------------------------------------------

KEY = "sk-canary0123456789ABCDEFGHij"


def test_a_redaction_is_identical_in_events_value_and_record_with_its_offsets(mode, tmp_path):
    second = "sk-second0123456789abcdefgh"
    text = f"First {KEY}, then {second}."
    fn = _fn([redact_keys], ScriptedLM([text], chunk=5))
    with functai.settings(log_calls=str(tmp_path / "calls")):
        texts, value, record = _stream(fn, "keys?", mode=mode)
    shown = "".join(texts)
    assert shown == value == "First [key], then [key]."
    entries = [c for c in record.changes if c["hook"] == "chunk"]
    assert [c["change"] for c in entries] == [{"text": "[key]", "at": [6, 11], "replaced": len(KEY)},
                                              {"text": "[key]", "at": [18, 23], "replaced": len(second)}]
    assert all(value[slice(*c["change"]["at"])] == "[key]" for c in entries)
    assert entries[0]["plugin"] == "redact-keys" and entries[0]["version"] == "1.0.0" and entries[0]["note"]
    logged = (tmp_path / "calls").read_text() if (tmp_path / "calls").is_file() else "".join(
        p.read_text() for p in (tmp_path / "calls").rglob("*") if p.is_file())
    assert KEY not in logged and "[key]" in logged


@pytest.mark.parametrize("how", ["call", "run", "acall"])
def test_a_call_not_streamed_is_guarded_once_with_its_whole_text(how):
    events = []
    seen = Plugin("seen", chunk=lambda chunk: events.append((chunk.text, chunk.shown, chunk.final)))
    fn = _fn([redact_keys, seen], ScriptedLM([f"key {KEY} here"]))
    if how == "call":
        value = fn("k")
    elif how == "run":
        value, record = fn.run("k")
        assert record.output == value and record.changes[0]["change"]["at"] == [4, 9]
    else:
        value = asyncio.run(fn.acall("k"))
    assert value == "key [key] here"
    assert events == [("key [key] here", "", True)]  # one event; the later guard saw the redacted text


def test_a_later_redaction_moves_the_offsets_of_an_earlier_one_still_held():
    first = Plugin("first", chunk_window=50, chunk=lambda c: Change(text=c.text.replace("b", "BBB"), hold=not c.final)
                   if "b" in c.text else (None if c.final else Change(hold=True)))
    second = Plugin("second",
                    chunk=lambda c: Change(text=c.text.replace("a", "")) if c.final and "a" in c.text else None)
    fn = _fn([first, second], ScriptedLM(["xbyaa"], chunk=2))
    texts, value, record = _stream(fn, "x")
    assert value == "xBBBy" == "".join(texts)
    spans = [c["change"] for c in record.changes]
    assert spans == [{"text": "BBB", "at": [1, 4], "replaced": 1}, {"text": "", "at": [5, 5], "replaced": 2}]


def test_the_canary_key_split_at_every_offset_never_shows():
    """Every chunk size 1–16, the key starting at every offset of a piece, at the end of the text or
    before other text: 0 leaks, and exactly the redacted text shown."""
    leaks = runs = 0
    for size in range(1, 17):
        for offset in range(size + 1):
            for after in (".", " and more text", ""):
                before = "x" * offset
                text = f"{before}{KEY}{after}"
                fn = _fn([redact_keys], ScriptedLM([text], chunk=size))
                texts, value, _ = _stream(fn, "k")
                shown = "".join(texts)
                runs += 1
                if KEY[3:9] in shown or shown != f"{before}[key]{after}" or value != shown:
                    leaks += 1
    assert runs == 16 * 17 // 2 * 3 + 16 * 3 and leaks == 0


def test_the_canary_in_an_async_stream_and_next_to_a_word_ending_in_s():
    leaks = 0
    for size in (1, 3, 7, 16):
        for offset in range(size + 1):
            text = f"{'y' * offset}keys sk {KEY}s sk-"
            fn = _fn([redact_keys], ScriptedLM([text], chunk=size))
            texts, value, _ = _stream(fn, "k", mode="async")
            leaks += "".join(texts) != f"{'y' * offset}keys sk [key] sk-" or value != "".join(texts)
    assert leaks == 0


# --- stop ------------------------------------------------------------------------------------------

def _stopper():
    guard = Plugin("no-passwords", version="2.0.0", chunk_window=16)

    @guard.chunk
    def stop_passwords(chunk):
        if "password" in chunk.text:
            raise FunctAIError("a password was about to be shown", code="password-shown")
        return None if chunk.final else Change(hold=True)

    return guard


def test_stop_fails_the_stream_as_a_refusal_and_is_recorded(mode):
    fallback_asked = []
    fallback = Plugin("fallback", model_error=lambda failure: fallback_asked.append(1) or Change(lm="other"))
    text = "Your login is alex and your password is hunter2."
    fn = _fn([_stopper(), fallback], ScriptedLM([text, text], chunk=4))
    shown = []

    async def consume():
        async with fn.astream("login?") as stream:
            async for event in stream:
                shown.append(event.text or "")

    with pytest.raises(PluginError) as raised:
        if mode == "sync":
            with fn.stream("login?") as stream:
                for event in stream:
                    shown.append(event.text or "")
        else:
            asyncio.run(consume())
    error = raised.value
    assert error.code == "plugin-refused" and error.plugin == "no-passwords" and error.hook == "chunk"
    assert error.details["reason"] == "a password was about to be shown"
    assert error.details["refused"] == "password-shown"
    assert "password" not in "".join(shown) and "".join(shown) == text[:len("".join(shown))]
    record = error.record
    assert record.error["code"] == "plugin-refused" and record.output is None
    assert record.changes == [{"plugin": "no-passwords", "version": "2.0.0", "hook": "chunk",
                               "change": {"stop": "a password was about to be shown", "at": len("".join(shown)),
                                          "code": "password-shown"}}]
    assert fallback_asked == []  # a guard's stop is no model failure: no other model is asked


def test_stop_in_a_call_not_streamed():
    fn = _fn([_stopper()], ScriptedLM(["the password is x"]))
    with pytest.raises(PluginError) as raised:
        fn("p")
    assert raised.value.code == "plugin-refused"
    assert raised.value.record.changes[0]["change"] == {"stop": "a password was about to be shown", "at": 0,
                                                          "code": "password-shown"}


def test_stop_closes_the_models_stream():
    closed = []

    def pieces():
        try:
            for piece in ("ok ", "password ", "more ", "text"):
                yield piece
            yield Reply(text="ok password more text", finish_reason="stop")
        finally:
            closed.append(True)

    class Client:
        """A client that keeps its responses (as a connection pool would): only closing ends one."""

        def __init__(self):
            self.responses = []

        def complete(self, request):
            raise AssertionError("streamed")

        def stream(self, request):
            self.responses.append(pieces())
            return self.responses[-1]

    client = Client()
    stream = _fn([_stopper()], client).stream("p")
    with pytest.raises(PluginError):
        list(stream)
    assert closed == [True]


# --- conversations ---------------------------------------------------------------------------------

@pytest.mark.parametrize("streamed", [True, False])
def test_a_guarded_turn_keeps_only_redacted_text_in_history_and_store(tmp_path, streamed):
    lm = ScriptedLM([f"Your key: {KEY}", "Noted."], chunk=3)
    fn = _fn([redact_keys], lm)
    chat = fn.conversation("alex", store=tmp_path / "chats")
    if streamed:
        with chat.stream("my key?") as stream:
            shown = "".join(e.text for e in stream if e.kind == "text")
    else:
        shown = chat("my key?")
    assert shown == "Your key: [key]" == chat.head.outputs["output"]
    chat("thanks")
    history = json.dumps([dict(m) for m in lm.requests[-1].messages])
    assert "Your key: [key]" in history and KEY not in history
    stored = "".join(p.read_text() for p in (tmp_path / "chats").rglob("*") if p.is_file())
    assert "[key]" in stored and KEY not in stored


# --- the plugin's window ---------------------------------------------------------------------------

def test_chunk_window_is_checked_and_described_and_kept_by_copies():
    from functai._hooks.installed import _with_version

    for bad in (-1, True, "64", 1.5):
        with pytest.raises(TypeError, match="chunk_window"):
            Plugin("p", chunk_window=bad)
    guard = Plugin("g", chunk_window=64, chunk=lambda c: None)
    assert "chunk_window=64" in guard.describe()
    assert _with_version(guard, "1.2.3").chunk_window == 64


def test_a_hold_without_a_window_is_refused_naming_the_fix():
    greedy = Plugin("greedy", chunk=lambda chunk: Change(hold=True))
    with pytest.raises(PluginError) as raised:
        _stream(_fn([greedy], ScriptedLM(["text"], chunk=2)), "x")
    assert raised.value.code == "plugin-change" and raised.value.field == "hold"
    assert "chunk_window=" in raised.value.message


def test_chunk_takes_only_its_fields():
    wrong = Plugin("wrong", chunk=lambda chunk: Change(output="no"))
    with pytest.raises(PluginError) as raised:
        _fn([wrong], ScriptedLM(["text"]))("x")
    assert raised.value.code == "plugin-change" and raised.value.field == "output"
    for field, value in (("hold", "yes"), ("stop", " "), ("text", 3)):
        with pytest.raises(PluginError) as refused:
            Change(**{field: value})
        assert refused.value.field == field


def test_an_async_def_guard_guards_a_call_not_streamed():
    guard = Plugin("slow")

    @guard.chunk
    async def mask(chunk):
        await asyncio.sleep(0)
        return Change(text=chunk.text.replace("7", "#"), note="digits") if "7" in chunk.text else None

    fn = _fn([guard], ScriptedLM(["a7b", "a7b"]))
    value, record = fn.run("x")
    assert value == "a#b" == asyncio.run(fn.acall("x"))
    assert record.changes == [{"plugin": "slow", "version": "0.0.0", "hook": "chunk",
                               "change": {"text": "#", "at": [1, 2], "replaced": 1}, "note": "digits"}]


@pytest.mark.parametrize("streamed", [True, False])
def test_a_resumed_turn_records_the_redactions_of_the_reply_it_reads_again(install, tmp_path, streamed):
    import functai_approval

    install(functai_approval.plugin)

    @tool(effects="changes")
    def rotate(key: str) -> str:
        """Rotate a key."""
        return "rotated"

    asking = attrs.evolve(tool_call("rotate", {"key": "old"}), text=f"Rotating {KEY} now.")
    lm = ScriptedLM([asking, "Done."], chunk=4)

    @ai(client=lm, tools=[rotate], plugins=[redact_keys], approve="changes", log_calls=str(tmp_path / "calls"))
    def keys(request: str) -> str:
        """Handle the request."""

    chat = keys.conversation("alex", store=tmp_path / "chats")
    with pytest.raises(functai.Waiting) as waiting:
        if streamed:
            with chat.stream("rotate it") as stream:
                shown = [e.text for e in stream if e.kind == "text"]
            assert "".join(shown) == "Rotating [key] now."
        else:
            chat("rotate it")
    turn = waiting.value.turn
    turn.approve()
    assert turn.resume() == "Done." and len(lm.requests) == 2  # the first reply read again, not asked
    record = list(functai.read_calls(tmp_path / "calls"))[-1]
    assert [c["change"] for c in record.changes if c["hook"] == "chunk"] == [
        {"text": "[key]", "at": [9, 14], "replaced": len(KEY)}]  # recorded again on resume, once
    stored = "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    assert KEY not in stored and "[key]" in stored
