"""Stream guards see everything a call shows or keeps, not only the reply's text: the model's
reasoning (``reasoning_content`` and a leading ``<think>`` block), a plugin's answer (a canned
reply, a cache hit, a ``model_error`` reply, a ``reply`` handler's replacement), a refusal's words
and an error's message. A canary key, redacted by the guard docs/async.md ships, is looked for in
the value, the record, the call log and the store, in every driver; the model is a real HTTP
server on loopback, read by functai's own client."""

from __future__ import annotations

import asyncio
import json
import pathlib

import pytest
from loopback import LoopbackServer, Scripted, chunks, completion, error_body
from test_stream_guards import redact_keys

import functai
from functai import Change, FunctAIError, Plugin, Reply, ai
from functai.testing import ScriptedLM

CANARY = "sk-canary0123456789ABCDEFGHij"
DRIVERS = ("run", "arun", "stream", "astream")


def _client(server):
    from functai._models.openai import OpenAIClient

    return OpenAIClient(base_url=server.url, api_key="sk-test-key-123456", max_retries=0, name="loopback")


def _fn(client, *plugins):
    @ai(plugins=[*plugins, redact_keys], client=client)
    def helper(question: str) -> str:
        """Answer the question."""

    return helper


def _call(fn, driver, *args):
    """(value, record) of one call, in ``driver``; a failed call's error is returned as its value."""
    try:
        if driver == "run":
            return fn.run(*args)
        if driver == "arun":
            return asyncio.run(fn.arun(*args))
        if driver == "stream":
            with fn.stream(*args) as stream:
                shown = "".join(e.text for e in stream if e.kind == "text")
            _shown(shown, stream.value)
            return stream.value, stream.record

        async def streamed():
            async with fn.astream(*args) as stream:
                shown = "".join([e.text async for e in stream if e.kind == "text"])
            _shown(shown, stream.value)
            return stream.value, stream.record

        return asyncio.run(streamed())
    except FunctAIError as error:
        return error, getattr(error, "record", None)


def _shown(shown: str, value: str) -> None:
    """What a stream showed is what the guards released (a ``reply`` handler may replace the value after)."""
    assert CANARY[3:12] not in shown


def _everything(folder: pathlib.Path) -> str:
    return "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


def _leaks(value, record, folder: pathlib.Path) -> list[str]:
    """Where the canary (or a long piece of it) is found."""
    piece = CANARY[3:12]
    found = []
    if piece in str(value) or (isinstance(value, FunctAIError) and piece in value.message):
        found.append("value")
    if record is not None and piece in json.dumps(record.to_dict(), default=str):
        found.append("record")
    if folder.exists() and piece in _everything(folder):
        found.append("files")
    return found


def _reasoning_events(offset: int) -> list:
    """A streamed reply whose reasoning carries the canary split at ``offset``."""
    thought = f"I recall the key {CANARY} from before."
    cut = thought.index(CANARY) + offset
    events = chunks("The answer is 42.")
    head = {**events[0], "choices": [{"index": 0, "delta": {"reasoning_content": thought[:cut]}, "finish_reason": None}]}
    tail = {**events[0], "choices": [{"index": 0, "delta": {"reasoning_content": thought[cut:]}, "finish_reason": None}]}
    return [events[0], head, tail, *events[1:]]


@pytest.mark.parametrize("driver", DRIVERS)
def test_reasoning_content_at_every_split_offset_is_guarded(driver, tmp_path):
    leaks = []
    with LoopbackServer() as server:
        fn = _fn(_client(server))
        for offset in range(len(CANARY) + 1):
            logs = tmp_path / f"calls-{offset}"
            if driver.endswith("stream"):
                server.script(Scripted(events=_reasoning_events(offset)))
            else:
                server.script(Scripted(body=completion("The answer is 42.",
                                                       reasoning_content=f"key {CANARY[:offset]}{CANARY[offset:]}.")))
            with functai.settings(log_calls=str(logs)):
                value, record = _call(fn, driver, "q")
            assert value == "The answer is 42." and "[key]" in record.reasoning
            leaks += _leaks(value, record, logs)
    assert leaks == []


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_leading_think_block_is_reasoning_and_guarded(driver, tmp_path):
    text = f"<think>the key is {CANARY}</think>The answer is 42."
    with LoopbackServer() as server:
        if driver.endswith("stream"):
            server.script(Scripted(events=chunks(*[text[i:i + 5] for i in range(0, len(text), 5)])))
        else:
            server.script(Scripted(body=completion(text)))
        with functai.settings(log_calls=str(tmp_path / "calls")):
            value, record = _call(_fn(_client(server)), driver, "q")
    assert value == "The answer is 42." and record.reasoning == "the key is [key]"
    assert _leaks(value, record, tmp_path / "calls") == []
    parts = [c["change"].get("part", "text") for c in record.changes]
    # a stream showed the block as it came (guarded as text); the reply's reasoning is guarded too
    assert parts == (["text", "reasoning"] if driver.endswith("stream") else ["reasoning"])


def _canned(event):
    return Reply(text=f"canned {CANARY}", finish_reason="stop")


def _rescue(event):
    return Reply(text=f"fallback {CANARY}", finish_reason="stop")


def _replace(event):
    return Reply(text=f"replaced {CANARY}", finish_reason="stop")


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("how", ["request", "model_error", "reply"])
def test_a_plugins_answer_is_guarded_in_value_record_and_log(driver, how, tmp_path):
    plugin = Plugin("answers", **{how: {"request": _canned, "model_error": _rescue, "reply": _replace}[how]})
    with LoopbackServer() as server:
        server.script(Scripted(status=400, body=error_body("bad request")) if how == "model_error"
                      else Scripted(events=chunks("plain answer")) if driver.endswith("stream")
                      else Scripted(body=completion("plain answer")))
        with functai.settings(log_calls=str(tmp_path / "calls")):
            value, record = _call(_fn(_client(server), plugin), driver, "q")
    assert isinstance(value, str) and value.endswith("[key]"), value
    assert _leaks(value, record, tmp_path / "calls") == []


def test_a_cache_filled_before_the_guard_serves_no_canary(tmp_path):
    from functai_cache import cache

    kept = cache(f"sqlite:///{tmp_path / 'cache.db'}")

    @ai(plugins=[kept], client=ScriptedLM([f"the key is {CANARY}"]))
    def helper(question: str) -> str:
        """Answer the question."""

    assert CANARY in helper("q")  # no guard yet: kept as the model said it
    guarded = _fn(ScriptedLM([]), kept)  # a model that cannot answer: only the cache can
    for driver in DRIVERS:
        with functai.settings(log_calls=str(tmp_path / f"calls-{driver}")):
            value, record = _call(guarded, driver, "q")
        assert value == "the key is [key]"
        assert _leaks(value, record, tmp_path / f"calls-{driver}") == []


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_refusal_and_an_error_message_never_quote_the_canary(driver, tmp_path):
    streamed = driver.endswith("stream")
    refusal = [{**chunks()[0], "choices": [{"index": 0, "delta": {"refusal": f"I won't repeat {CANARY}"},
                                            "finish_reason": "stop"}]}]
    answers = [
        Scripted(events=refusal) if streamed else Scripted(body=completion(None, refusal=f"I won't repeat {CANARY}")),
        Scripted(events=[*chunks("half")[:2], {"error": {"message": f"upstream said {CANARY}"}}]) if streamed
        else Scripted(status=500, body=error_body(f"upstream said {CANARY}")),
        Scripted(events=[f'{{"choices": [{{"delta": {{"content": "{CANARY}']) if streamed
        else Scripted(body=f'{{"choices": "{CANARY}"'),
    ]
    with LoopbackServer() as server:
        fn = _fn(_client(server))
        for n, answer in enumerate(answers):
            server.script(answer)
            logs = tmp_path / f"calls-{n}"
            with functai.settings(log_calls=str(logs)):
                error, _ = _call(fn, driver, "q")
            assert isinstance(error, FunctAIError), error
            assert _leaks(error, getattr(error, "record", None), logs) == [], (n, error.message)


def test_a_malformed_stream_event_is_a_protocol_error_that_quotes_nothing():
    from functai._models.answers import Assembler, StreamCut

    assembler = Assembler()
    assembler.line(f"data: {{\"content\": \"{CANARY}")
    with pytest.raises(StreamCut) as cut:
        assembler.line("")
    assert cut.value.code == "model-protocol" and CANARY not in str(cut.value)


def test_a_guarded_turn_keeps_no_canary_in_the_store(tmp_path):
    with LoopbackServer() as server:
        server.script(Scripted(body=completion(f"<think>{CANARY}</think>Noted.", reasoning_content=f"and {CANARY}")),
                      Scripted(events=_reasoning_events(7)))
        chat = _fn(_client(server), Plugin("answers", model_error=_rescue)).conversation(
            "alex", store=tmp_path / "chats")
        with functai.settings(log_calls=str(tmp_path / "calls")):
            assert chat("first") == "Noted."
            with chat.stream("second") as stream:
                assert "".join(e.text for e in stream if e.kind == "text") == "The answer is 42."
            server.script(Scripted(status=400, body=error_body("bad")))
            assert chat("third") == "fallback [key]"
    stored = _everything(tmp_path / "chats") + _everything(tmp_path / "calls")
    assert "[key]" in stored and CANARY[3:12] not in stored
