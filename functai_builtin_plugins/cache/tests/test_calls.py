"""The cache in real calls: answered requests skip the model in every driver, are recorded with
a note naming the call that paid, stay replayable, and are never kept when they should not be."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import textwrap
import time

import functai
import pytest
from functai import Change, FunctAIError, Plugin, Reply, Request, ai, tool
from functai.testing import ScriptedLM, tool_call
from functai_cache import __version__, cache

from checkout import shipped_env

pytestmark = pytest.mark.usefixtures("functai_isolated")

PARIS = Reply(text="Paris", finish_reason="stop", usage={"input_tokens": 12, "output_tokens": 1})
NOTE = re.compile(r"cached reply of call (\S+) \(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)")


@ai
def capital(country: str) -> str:
    """Name the capital city."""


def answer_change(text, *, usage=None, tool_calls=(), finish_reason="stop"):
    return {"answer": {"text": text, "tool_calls": list(tool_calls), "finish_reason": finish_reason,
                       "usage": usage or {}}}


def cached_from(record) -> str:
    """The call id the notes of the record's cache answers name (one call paid for them all)."""
    ids = set()
    for change in record.changes:
        assert change["plugin"] == "cache" and change["hook"] == "request", change
        found = NOTE.fullmatch(change["note"])
        assert found, change["note"]
        ids.add(found.group(1))
    (paid,) = ids
    return paid


def test_an_identical_call_is_answered_from_the_cache_and_recorded_as_such(store_name):
    lm = ScriptedLM([PARIS])  # one reply: a second model request would fail the call
    with functai.settings(client=lm, plugins=[cache(store_name)]):
        first = capital.run("France")
        second = capital.run("France")
    assert first.value == second.value == "Paris"
    assert len(lm.requests) == 1
    assert first.record.changes == []
    (change,) = second.record.changes
    assert {k: v for k, v in change.items() if k != "note"} == {
        "plugin": "cache", "version": __version__, "hook": "request",
        "change": answer_change("Paris", usage={"input_tokens": 12, "output_tokens": 1}),
    }
    assert cached_from(second.record) == first.record.id
    assert second.record.replayable is True
    assert not second.record.usage.get("input_tokens")  # no model was paid; the change keeps what the first cost


def test_a_hit_in_a_stream_and_in_acall():
    lm = ScriptedLM([PARIS, Reply(text="Rome", finish_reason="stop")])
    with functai.settings(client=lm, plugins=[cache()]):
        kept = capital("France")
        stream = capital.stream("France")
        events = list(stream)
        assert [(e.kind, e.text) for e in events if e.kind == "text"] == [("text", "Paris")]
        assert events[-1].kind == "done" and stream.value == "Paris"
        assert cached_from(stream.record) == cached_from(events[-1].record)

        async def both():
            paid = await capital.arun("Italy")  # kept by an async call ...
            answered = await capital.acall("France")
            return paid, answered

        paid, answered = asyncio.run(both())
        assert kept == answered == "Paris" and paid.value == "Rome"
        assert capital("Italy") == "Rome"  # ... answered in a plain one
    assert len(lm.requests) == 2


def test_async_streams_are_answered_too():
    lm = ScriptedLM([PARIS])

    async def go():
        with functai.settings(client=lm, plugins=[cache()]):
            await capital.acall("France")
            stream = capital.astream("France")
            return [event async for event in stream], stream

    events, stream = asyncio.run(go())
    assert [e.text for e in events if e.kind == "text"] == ["Paris"] and stream.value == "Paris"
    assert len(lm.requests) == 1


@tool(effects="reads")
def weather(city: str) -> str:
    """Today's weather in a city."""
    weather.runs += 1  # type: ignore[attr-defined]
    return f"sunny in {city}"


@ai(tools=[weather])
def forecast(city: str) -> str:
    """Say what to wear, from the weather."""


def test_tool_calls_are_kept_and_answered_and_the_tools_run_again():
    weather.runs = 0  # type: ignore[attr-defined]
    asked = tool_call("weather", {"city": "Oslo"})
    lm = ScriptedLM([Reply(tool_calls=asked.tool_calls, finish_reason="tool_calls", usage={"output_tokens": 5}),
                     Reply(text="A light coat.", finish_reason="stop")])
    with functai.settings(client=lm, plugins=[cache()]):
        first = forecast.run("Oslo")
        second = forecast.run("Oslo")
    assert first.value == second.value == "A light coat."
    assert len(lm.requests) == 2 and weather.runs == 2  # tools run for real; only the model is spared
    call = asked.tool_calls[0]
    assert [c["change"] for c in second.record.changes] == [
        answer_change(None, tool_calls=[{"id": call.id, "name": "weather", "input": {"city": "Oslo"}}],
                      finish_reason="tool_calls", usage={"output_tokens": 5}),
        answer_change("A light coat."),
    ]
    assert cached_from(second.record) == first.record.id
    assert second.record.tool_calls == first.record.tool_calls


def test_errors_cut_replies_and_refusals_are_never_kept():
    lm = ScriptedLM([
        FunctAIError("the server is down", code="model-http"),
        Reply(text="Par", finish_reason="length"),
        Reply(text="", refusal="I will not say.", finish_reason="stop"),
        Reply(text=" ", reasoning="Thinking about France...", finish_reason="stop"),
        PARIS,
    ])
    with functai.settings(client=lm, plugins=[cache()]):
        with pytest.raises(FunctAIError):
            capital("France")
        assert capital("France") == "Par"  # a cut reply is an answer for a str, but not kept
        with pytest.raises(FunctAIError) as refused:
            capital("France")
        assert refused.value.code == "model-refused"
        with pytest.raises(FunctAIError) as empty:
            capital("France")
        assert empty.value.code == "model-empty"  # it only reasoned
        assert capital("France") == "Paris"
        assert capital("France") == "Paris"
    assert len(lm.requests) == 5


def test_a_reply_another_plugin_answered_is_not_kept_and_a_hit_is_not_kept_again():
    canned = Plugin("canned", version="1.0.0")

    @canned.request
    def answer(event):
        return Reply(text="Canned", finish_reason="stop", note="canned")

    lm = ScriptedLM([PARIS])
    the_cache = cache()
    with functai.settings(client=lm, plugins=[the_cache]):
        with functai.settings(plugins=[canned]):
            assert capital("France") == "Canned"
        assert len(lm.requests) == 0
        first = capital.run("France")  # the canned reply was not kept: the model is asked
        assert first.value == "Paris" and len(lm.requests) == 1
        second = capital.run("France")
        third = capital.run("France")
    assert cached_from(second.record) == cached_from(third.record) == first.record.id


def test_an_entry_older_than_ttl_is_a_miss_and_the_next_reply_replaces_it():
    lm = ScriptedLM(reply=lambda request: f"answer {len(lm.requests)}")
    with functai.settings(client=lm, plugins=[cache(ttl=0.3)]):
        first = capital.run("France")
        assert capital("France") == "answer 1"
        time.sleep(0.4)
        second = capital.run("France")
        third = capital.run("France")
    assert (first.value, second.value, third.value) == ("answer 1", "answer 2", "answer 2")
    assert cached_from(third.record) == second.record.id and len(lm.requests) == 2


def tagging(tags):
    """A plugin whose request handler adds the next of ``tags`` to the request as it will be sent."""
    tagger = Plugin("tagger", version="1.0.0")
    tags = iter(tags)

    @tagger.request
    def tag(event):
        r = event.request
        return Request(model=r.model, messages=[*r.messages, {"role": "user", "content": next(tags)}],
                       tools=r.tools, settings=r.settings, output_schema=r.output_schema)

    return tagger


def test_the_key_is_the_request_as_every_other_plugin_left_it():
    lm = ScriptedLM(reply=lambda request: request.messages[-1]["content"])
    with functai.settings(client=lm, plugins=[cache(), tagging(["(a)", "(a)", "(b)", "(a)"])]):  # listed after it
        assert [capital("France") for _ in range(4)] == ["(a)", "(a)", "(b)", "(a)"]
    assert [r.messages[-1]["content"] for r in lm.requests] == ["(a)", "(b)"]


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), "1h", True])
def test_a_ttl_that_is_not_seconds_is_refused(ttl):
    with pytest.raises(FunctAIError) as raised:
        cache(ttl=ttl)
    assert raised.value.code == "cache-ttl"


def test_a_store_that_fails_while_calls_run_is_a_miss_that_is_logged(tmp_path, caplog):
    folder = tmp_path / "cache"
    lm = ScriptedLM(reply=lambda request: "Paris")
    the_cache = cache(str(folder))
    folder.write_text("a file where the folder was")  # every read and write now fails
    with functai.settings(client=lm, plugins=[the_cache]), caplog.at_level("WARNING", logger="functai.cache"):
        assert capital("France") == "Paris"
        assert capital("France") == "Paris"
    assert len(lm.requests) == 2
    assert "the call goes on without it" in caplog.text


def test_functai_cache_is_the_installed_builtin():
    plugin = functai.cache("memory:", ttl=60)
    assert isinstance(plugin, Plugin) and plugin.name == "cache"
    lm = ScriptedLM([PARIS])
    with functai.settings(client=lm, plugins=[plugin]):
        assert capital("France") == capital("France") == "Paris"
    assert len(lm.requests) == 1


def test_a_rated_call_answered_from_the_cache_is_asked_again_exactly_without_it(tmp_path):
    log = str(tmp_path / "calls")
    paid = ScriptedLM([PARIS])
    with functai.settings(client=paid, plugins=[cache()], log_calls=log):
        capital("France")
        _, answered = capital.run("France")
    assert cached_from(answered) and answered.replayable
    functai.rate(answered, good=True, log=log)
    again = ScriptedLM([Reply(text="Paris", finish_reason="stop")])
    with functai.settings(client=again, log_calls=log):
        result = functai.evaluate(capital, workers=1, progress=False)
    assert [row.passed for row in result.rows] == [True]
    assert again.requests == paid.requests  # the identical request, sent to the model this time
    (new,) = [r for r in functai.read_calls(log) if r.id == result.rows[0].call]
    assert new.changes == []


def test_a_cache_in_the_evaluating_process_answers_again_and_says_so(tmp_path):
    log = str(tmp_path / "calls")
    store = "sqlite:///" + str(tmp_path / "cache.db")
    paid = ScriptedLM([PARIS])
    with functai.settings(client=paid, plugins=[cache(store)], log_calls=log):
        first = capital.run("France")
    functai.rate(first.record, good=True, log=log)
    idle = ScriptedLM([])
    with functai.settings(client=idle, plugins=[cache(store)], log_calls=log):
        result = functai.evaluate(capital, workers=1, progress=False)
    assert [row.passed for row in result.rows] == [True] and idle.requests == []
    (new,) = [r for r in functai.read_calls(log) if r.id == result.rows[0].call]
    assert cached_from(new) == first.record.id


# -- a smaller part of the property test (test_key.py) through real calls ---------------------------------

def _lookup(order_type):
    def lookup(order):
        """Where an order is."""
        return f"order {order}: in transit"

    lookup.__annotations__ = {"order": order_type, "return": str}
    return tool(effects="reads")(lookup)


lookup, lookup_by_code = _lookup(int), _lookup(str)  # one tool name, two schemas


def _support(returns, tools):
    def support(question: str):
        """Answer the customer's question."""

    support.__annotations__["return"] = returns
    return ai(tools=tools)(support)


SUPPORT = _support(str, [lookup])
SUPPORT_OTHER_TOOL = _support(str, [lookup_by_code])
SUPPORT_INT = _support(int, [lookup])

brief = Plugin("brief", version="1.0.0")


@brief.before_call
def be_brief(call):
    return Change(sections=["Be brief."])


BASE = dict(fn=SUPPORT, question="Where is order 1234?", settings={"temperature": 0.2}, plugins=[])
VARIANTS = {  # name: (the change, the one part of the request it changes)
    "model": (dict(settings={"temperature": 0.2, "lm": "other-model"}), "model"),
    "a setting": (dict(settings={"temperature": 0.3}), "settings"),
    "a tool's schema": (dict(fn=SUPPORT_OTHER_TOOL), "tools"),
    "one message character": (dict(question="Where is order 1235?"), "messages"),
    "the output format": (dict(fn=SUPPORT_INT), "output_schema"),
    "a plugin's section": (dict(plugins=[brief]), "messages"),
}
PARTS = ("model", "messages", "tools", "settings", "output_schema")


def test_calls_changed_in_one_part_ask_the_model_and_unchanged_ones_do_not():
    lm = ScriptedLM(reply=lambda request: str(len(lm.requests)))  # each model reply names its request
    the_cache = cache()

    def call(fn, question, settings, plugins):
        with functai.settings(client=lm, **settings), functai.settings(plugins=[*plugins, the_cache]):
            return fn(question)

    base = call(**BASE)
    assert str(base) == "1"
    values = {}
    for name, (changed, part) in VARIANTS.items():
        before = len(lm.requests)
        values[name] = call(**{**BASE, **changed})
        assert len(lm.requests) == before + 1, f"{name}: answered from the cache"
        assert str(values[name]) == str(before + 1)
        differ = [p for p in PARTS if getattr(lm.requests[-1], p) != getattr(lm.requests[0], p)]
        assert differ == [part], name
    asked = len(lm.requests)
    for name, (changed, _) in VARIANTS.items():
        assert call(**{**BASE, **changed}) == values[name], name
    assert call(**BASE) == base
    assert len(lm.requests) == asked == 1 + len(VARIANTS)


# -- two processes ---------------------------------------------------------------------------------------

PROCESS = textwrap.dedent('''
    import json, sys
    import functai
    from functai import ai
    from functai.testing import ScriptedLM
    from functai_cache import cache

    @ai
    def capital(country: str) -> str:
        """Name the capital city."""

    lm = ScriptedLM(reply=lambda request: "Paris, said process " + sys.argv[2])
    with functai.settings(client=lm, plugins=[cache(sys.argv[1])]):
        value, record = capital.run("France")
    print(json.dumps({"value": value, "asked": len(lm.requests), "id": record.id,
                      "notes": [c.get("note") for c in record.changes]}))
''')


def test_two_processes_share_a_sqlite_cache(tmp_path):
    store = "sqlite:///" + str(tmp_path / "shared" / "cache.db")
    runs = []
    for name in ("one", "two"):
        done = subprocess.run([sys.executable, "-c", PROCESS, store, name], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path, env=shipped_env())
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout))
    one, two = runs
    assert (one["asked"], one["notes"]) == (1, [])
    assert two["asked"] == 0 and two["value"] == "Paris, said process one"
    assert NOTE.fullmatch(two["notes"][0]).group(1) == one["id"]


@tool(effects="changes")
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def test_a_resumed_turn_reads_its_recorded_reply_not_the_cache(tmp_path, installed_plugins):
    """The turn's own record holds the reply it paid for: the cache never answers it (the record
    credited the cache, with another call's reply and less usage than was paid)."""
    import functai_approval

    installed_plugins(functai_approval.plugin)

    @ai(tools=[refund])
    def desk(request: str) -> str:
        """Help."""

    def model(request):
        if request.messages[-1]["role"] == "tool":
            return Reply(text="Done.", finish_reason="stop", usage={"input_tokens": 7, "output_tokens": 3})
        return Reply(tool_calls=tool_call("refund", {"order": "A1"}).tool_calls, finish_reason="tool_calls",
                     usage={"input_tokens": 100, "output_tokens": 50})

    records = {}
    for plugins in ([], [cache(str(tmp_path / "cache"))]):
        log = str(tmp_path / f"log{len(plugins)}")
        with functai.settings(log_calls=log):
            chat = desk.conversation("t", store=str(tmp_path / f"s{len(plugins)}"), client=ScriptedLM(reply=model),
                                     approve="changes", plugins=plugins)
            with pytest.raises(functai.Waiting) as waiting:
                chat("refund A1")
            waiting.value.turn.approve()
            assert waiting.value.turn.resume() == "Done."
        (records[len(plugins)],) = functai.read_calls(log)
    plain, cached = records[0], records[1]
    assert cached.changes == [] and (cached.usage, cached.attempts) == (plain.usage, plain.attempts) == (
        {"input_tokens": 107, "output_tokens": 53}, 2)


def test_a_resumed_turn_keeps_no_reply_under_a_request_that_did_not_ask_it(tmp_path, installed_plugins):
    """Model "a" failed and the fallback asked "b", whose tool call waits for approval: resumed, the
    turn reads b's reply back. It is not kept again, under the request as rebuilt (for "a", or for a
    function changed since): a later call asking "a" is answered by "a", and runs no refund."""
    import functai_approval

    installed_plugins(functai_approval.plugin)

    @ai(tools=[refund])
    def desk(request: str) -> str:
        """Help."""

    seen = []

    def model(request):
        if request.model == "a":
            raise functai.ModelError("a is down", code="model-http", status=503)
        if request.messages[-1]["role"] == "tool":
            return Reply(text="Done (b).", finish_reason="stop")
        return Reply(tool_calls=tool_call("refund", {"order": "A1"}).tool_calls, finish_reason="tool_calls")

    watch = Plugin("watch", reply=lambda event: seen.append((event.request.model, event.recorded)))
    kept = cache(str(tmp_path / "cache"))
    chat = desk.conversation("t", store=str(tmp_path / "store"), client=ScriptedLM(reply=model), lm="a",
                             approve="changes", plugins=[functai.fallback(["b"]), kept, watch])
    with pytest.raises(functai.Waiting) as waiting:
        chat("refund A1")
    waiting.value.turn.approve()
    assert waiting.value.turn.resume() == "Done (b)."
    assert seen == [("b", False), ("b", True), ("b", False)]  # the reply read back names the model that gave it

    back = ScriptedLM(reply=lambda request: Reply(text=f"{request.model} answers", finish_reason="stop"))
    with functai.settings(client=back, lm="a", plugins=[kept]):
        assert desk("refund A1") == "a answers"
    assert [request.model for request in back.requests] == ["a"]


def test_replies_a_call_could_not_read_are_not_kept_and_the_model_is_asked_again(store_name):
    @ai
    def count(text: str) -> int:
        """Count the words."""

    lm = ScriptedLM(["three", "three", "3", "3"])  # a bad moment, then the model is fine
    with functai.settings(client=lm, plugins=[cache(store_name)]):
        with pytest.raises(FunctAIError) as info:
            count("a b c")
        assert info.value.code == "output-invalid"
        assert count("a b c") == 3 and len(lm.requests) == 3  # asked again, not answered "three" from the cache
        value, record = count.run("a b c")
    assert value == 3 and len(lm.requests) == 3 and record.changes[0]["plugin"] == "cache"


def test_a_call_kept_without_content_writes_none_of_it_to_a_shared_store(tmp_path):
    folder = tmp_path / "cache"
    lm = ScriptedLM(reply=lambda request: "SECRET-DIAGNOSIS for Jane Roe")
    with functai.settings(client=lm, plugins=[cache(str(folder))], log_content=False):
        capital("France")
        capital("France")
    assert len(lm.requests) == 2  # nothing kept, so nothing answered
    assert not any("SECRET" in path.read_text() for path in folder.rglob("*") if path.is_file())
    with functai.settings(client=lm, plugins=[cache()], log_content=False):  # this process's memory: kept
        capital("France")
        capital("France")
    assert len(lm.requests) == 3


def test_the_description_names_a_store_url_without_its_password():
    plugin = cache("postgresql://app:hunter2-secret@db.internal:5432/x?sslpassword=s3")
    assert "hunter2" not in plugin.describe() and "s3" not in plugin.describe()
    assert "postgresql://app@db.internal:5432/x" in plugin.describe()


@pytest.mark.parametrize("url", ["postgresql://app:Hunter2#prod-pw@db.internal:5432/x",
                                 "postgresql://app:Hunter2?prod-pw@db.internal:5432/x",
                                 "postgresql://app:Hunter2/prod-pw@db.internal:5432/x"])
def test_a_password_holding_what_ends_a_url_elsewhere_is_not_shown(url):
    """The server's client reads the password up to the "@" ("#", "?" and "/" included)."""
    shown = cache(url).describe()
    assert "Hunter2" not in shown and "prod-pw" not in shown, shown


def test_a_memory_cache_lets_the_answers_it_built_go_past_the_ttl(monkeypatch):
    """In memory, a text answer is built once and handed out again; past the ttl it goes, as the
    store's entries do (the built answers were kept for good)."""
    import inspect

    import functai_cache

    now = [1000.0]
    monkeypatch.setattr(functai_cache.time, "time", lambda: now[0])
    kept = cache("memory:", ttl=10)
    (handler,) = kept.handlers("request")
    built = inspect.getclosurevars(handler).nonlocals["built"]
    lm = ScriptedLM(reply=lambda request: Reply(text="ok", finish_reason="stop"))
    with functai.settings(client=lm, plugins=[kept]):
        for n in range(3000):
            now[0] += 1.0  # a second between calls: at most ten answers are within the ttl
            capital(f"country {n}")
            capital(f"country {n}")  # a hit: its answer is built and kept
    assert len(built) < 2100 and len(lm.requests) == 3000
