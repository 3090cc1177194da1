"""functai-otel against the OpenTelemetry SDK's in-memory exporter."""

import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import functai
from functai import Change, Plugin, Reply, ai, tool
from functai.testing import ScriptedLM, tool_call, tool_calls
from functai_otel import otel


@pytest.fixture
def spans(functai_isolated):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    plugin = otel(provider)
    functai.configure(plugins=[plugin])

    class Spans:
        tracer = provider.get_tracer("app")
        otel = plugin

        def all(self):
            return list(exporter.get_finished_spans())

        def named(self, name):
            return [s for s in self.all() if s.name == name]

        def one(self, name):
            [span] = self.named(name)
            return span

    return Spans()


@tool(effects="reads")
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped"


@tool(effects="changes")
def refund(order: str) -> str:
    """Refund an order."""
    raise ValueError(f"cannot refund {order}")


@ai
def summarize(text: str) -> str:
    """Summarize the text in a few words."""


@ai(tools=[lookup, summarize, refund])
def support(question: str) -> str:
    """Answer the customer."""


def script():
    return ScriptedLM([
        Reply(tool_calls=tool_calls([("lookup", {"order": "A1"}), ("summarize", {"text": "long text"})]).tool_calls,
              finish_reason="tool_calls", usage={"input_tokens": 30, "output_tokens": 8}),
        Reply(text="short", finish_reason="stop", usage={"input_tokens": 5, "output_tokens": 1}),
        Reply(text="It shipped.", finish_reason="stop", usage={"input_tokens": 50, "output_tokens": 4}),
    ])


def parent_of(span):
    return span.parent.span_id if span.parent is not None else None


def test_span_tree_of_a_call_with_a_tool_and_a_nested_ai_function(spans):
    functai.configure(client=script(), lm="openai/gpt-test")
    with spans.tracer.start_as_current_span("request handler") as app:
        value, record = support.run("where is A1?")
    assert value == "It shipped."
    outer = spans.one("functai.call support")
    inner = spans.one("functai.call summarize")
    tool_lookup = spans.one("execute_tool lookup")
    tool_summarize = spans.one("execute_tool summarize")
    chats = spans.named("chat gpt-test")
    assert len(chats) == 3
    assert parent_of(outer) == app.get_span_context().span_id
    assert parent_of(tool_lookup) == outer.context.span_id
    assert parent_of(tool_summarize) == outer.context.span_id
    assert parent_of(inner) == tool_summarize.context.span_id
    assert sorted(parent_of(c) for c in chats) == sorted(
        [outer.context.span_id, outer.context.span_id, inner.context.span_id])
    assert {s.context.trace_id for s in spans.all()} == {app.get_span_context().trace_id}
    assert outer.attributes["functai.call.id"] == record.id
    assert outer.attributes["functai.path"] == "support" and inner.attributes["functai.path"] == "support/summarize"
    assert outer.attributes["gen_ai.usage.input_tokens"] == 80 and outer.attributes["gen_ai.usage.output_tokens"] == 12
    assert tool_lookup.attributes["gen_ai.tool.name"] == "lookup"
    assert tool_lookup.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool_lookup.attributes["functai.tool.effects"] == "reads"
    assert outer.status.status_code == StatusCode.UNSET
    for span in (tool_lookup, tool_summarize, inner):  # children lie within their parents
        assert outer.start_time <= span.start_time <= span.end_time <= outer.end_time
    assert tool_summarize.start_time <= inner.start_time <= inner.end_time <= tool_summarize.end_time


def test_a_call_with_no_application_span_is_a_root(spans):
    functai.configure(client=ScriptedLM(["short"]))
    summarize("x")
    assert spans.one("functai.call summarize").parent is None


def test_model_request_spans_follow_the_genai_conventions(spans):
    functai.configure(client=script(), lm="openai/gpt-test", temperature=0.2, max_tokens=100)
    support("where is A1?")
    first = min(spans.named("chat gpt-test"), key=lambda s: s.start_time)
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.request.model"] == "gpt-test"
    assert first.attributes["gen_ai.provider.name"] == "openai"
    assert first.attributes["gen_ai.request.temperature"] == 0.2
    assert first.attributes["gen_ai.request.max_tokens"] == 100
    assert tuple(first.attributes["gen_ai.response.finish_reasons"]) == ("tool_calls",)
    assert first.attributes["gen_ai.usage.input_tokens"] == 30
    assert first.attributes["gen_ai.usage.output_tokens"] == 8
    assert first.kind.name == "CLIENT"


def test_a_call_is_an_agent_span_and_a_turns_spans_name_its_conversation(spans):
    functai.configure(client=ScriptedLM(["short", "shorter"]))
    summarize("x")
    call = spans.one("functai.call summarize")
    assert call.attributes["gen_ai.operation.name"] == "invoke_agent"  # not taken for a model call
    assert call.attributes["gen_ai.agent.name"] == "summarize"
    chat = summarize.conversation("c-42", store=functai.MemoryStore())
    chat("y")
    turn = [s for s in spans.named("functai.call summarize") if s.attributes.get("gen_ai.conversation.id")]
    [model_call] = [s for s in spans.all() if s.name.startswith("chat") and s.parent.span_id == turn[0].context.span_id]
    assert turn[0].attributes["gen_ai.conversation.id"] == "c-42"
    assert model_call.attributes["gen_ai.conversation.id"] == "c-42"


def test_a_failed_call_has_error_status_and_a_failed_tool_is_marked(spans):
    @ai
    def count(text: str) -> int:
        """How many words."""

    functai.configure(client=ScriptedLM(["many", "lots"]))
    with pytest.raises(functai.OutputError):
        count("a b")
    span = spans.one("functai.call count")
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes["error.type"] == "output-invalid"
    assert span.status.description == "output-invalid"

    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"}), "Sorry."]))
    support("refund A1")
    failed = spans.one("execute_tool refund")
    assert failed.status.status_code == StatusCode.ERROR and failed.attributes["error.type"] == "ValueError"
    assert "cannot refund A1" in failed.status.description


def test_changes_are_span_events_and_content_only_when_the_record_keeps_it(spans):
    brief = Plugin("brief", version="2.1.0", before_call=lambda call: Change(sections=["SECRET SECTION"]))
    def not_today(tool):
        if tool.name == "refund":
            raise functai.FunctAIError("NOT TODAY", code="no-refunds")

    no_refunds = Plugin("no-refunds", tool_call=not_today)
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "SECRET-ORDER"}), "SECRET ANSWER"]),
                      plugins=[brief, no_refunds, spans.otel])
    support("SECRET QUESTION")
    call = spans.one("functai.call support")
    events = [(e.name, dict(e.attributes)) for e in call.events]
    assert [(a["functai.plugin"], a["functai.plugin.version"], a["functai.hook"]) for _, a in events] == [
        ("brief", "2.1.0", "before_call"), ("no-refunds", "0.0.0", "tool_call")]
    assert json.loads(events[0][1]["functai.change"]) == {"sections": ["SECRET SECTION"]}
    assert spans.one("execute_tool refund").attributes["functai.tool.blocked"] == "no-refunds"

    before = len(spans.all())
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "SECRET-ORDER"}), "SECRET ANSWER"]),
                      log_content=False)
    support("SECRET QUESTION")
    new = spans.all()[before:]
    call = next(s for s in new if s.name == "functai.call support")
    assert [dict(e.attributes).get("functai.change") for e in call.events] == [None, None]
    dumped = "".join(s.to_json() for s in new)
    assert "SECRET" not in dumped


def test_no_api_key_reaches_any_span(spans):
    key = "sk-test-KEY-0123456789abcdef"
    functai.configure(client=script(), lm="openai/gpt-test", api_key=key)
    support("where is A1?")
    dumped = "".join(s.to_json() for s in spans.all())
    assert spans.all() and key not in dumped and "KEY-0123" not in dumped


def test_a_raising_provider_never_breaks_a_call(functai_isolated, caplog):
    class Broken:
        def get_tracer(self, *args, **kwargs):
            raise RuntimeError("no tracer today")

    functai.configure(client=ScriptedLM(["short"]), plugins=[otel(Broken())])
    with caplog.at_level("WARNING", logger="functai.otel"):
        value, record = summarize.run("x")
    assert "plugin=otel cannot trace" in caplog.text
    assert value == "short"


def test_the_installed_plugin_uses_the_global_provider_and_has_its_hooks():
    import functai_otel

    assert functai_otel.plugin.name == "otel" and functai_otel.plugin.version == functai_otel.__version__
    assert functai_otel.plugin.hooks == ("before_call", "request", "model_error", "reply", "tool_call", "tool_result",
                                         "call_end", "turn_wait")


LATE_PROVIDER = '''
import json

import functai
from functai import ai
from functai.testing import ScriptedLM
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@ai
def capital(country: str) -> str:
    """The capital city of the country."""


functai.configure(client=ScriptedLM(reply=lambda request: "Lima"), lm="openai/gpt-test", record_timing=True)
before = [capital.run("Peru").record.heard for _ in range(3)]
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
after = capital.run("Peru").record.heard
print(json.dumps({"before": before, "after": [(h["plugin"], h["hook"]) for h in after],
                  "spans": [span.name for span in exporter.get_finished_spans()]}))
'''


def test_the_installed_plugin_sits_out_until_a_provider_is_set_then_traces_the_next_call():
    """No provider: the plugin's handlers never run (the record's ``heard`` has none of them), so no
    span is made; the first call after ``set_tracer_provider`` is traced."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("FUNCTAI_", "OTEL_"))}
    env["FUNCTAI_LOAD_PLUGINS"] = "otel"  # the installed entry point, and no other installed plugin
    done = subprocess.run([sys.executable, "-c", LATE_PROVIDER], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["before"] == [[], [], []]
    assert data["after"] == [["otel", "reply"], ["otel", "call_end"]]
    assert data["spans"] == ["chat gpt-test", "functai.call capital"]


def test_a_provider_that_makes_no_spans_leaves_the_plugin_out(functai_isolated, monkeypatch):
    from opentelemetry.trace import NoOpTracerProvider

    functai.configure(client=ScriptedLM(reply=lambda request: "short"), record_timing=True,
                      plugins=[otel(NoOpTracerProvider())])
    assert summarize.run("x").record.heard == []
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")  # the SDK switched off: its tracers are no-ops
    functai.configure(plugins=[otel(TracerProvider())])
    assert summarize.run("x").record.heard == []
    monkeypatch.delenv("OTEL_SDK_DISABLED")
    functai.configure(plugins=[otel(TracerProvider())])
    assert [h["hook"] for h in summarize.run("x").record.heard] == ["reply", "call_end"]


def test_a_request_the_client_could_not_make_has_a_failed_chat_span(spans):
    functai.configure(client=ScriptedLM(["short", RuntimeError("connection reset")]))
    summarize("x")
    with pytest.raises(RuntimeError):
        summarize("y")
    ok, failed = sorted(spans.named("chat scripted"), key=lambda s: s.start_time)
    assert ok.status.status_code == StatusCode.UNSET
    assert failed.status.status_code == StatusCode.ERROR and failed.attributes["error.type"] == "exception"
    assert failed.attributes["gen_ai.request.model"] == "scripted"
    call = spans.named("functai.call summarize")[-1]
    assert parent_of(failed) == call.context.span_id and call.attributes["gen_ai.request.model"] == "scripted"


def test_a_request_a_plugin_answered_has_a_chat_span_that_names_it(spans):
    canned = Plugin("canned", request=lambda e: Reply(text="short", finish_reason="stop"))
    lm = ScriptedLM([])
    functai.configure(client=lm, plugins=[canned, spans.otel])
    assert summarize("a long text") == "short" and lm.requests == []
    chat = spans.one("chat scripted")
    assert chat.attributes["functai.answered_by"] == "canned"


def test_each_model_request_records_the_genai_client_metrics(functai_isolated):
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    functai.configure(client=script(), lm="openai/gpt-test",
                      plugins=[otel(provider, meter_provider=MeterProvider(metric_readers=[reader]))])
    support("where is A1?")  # three model requests: a tool call, the nested summary, the answer
    found = {metric.name: metric for resource in reader.get_metrics_data().resource_metrics
             for scope in resource.scope_metrics for metric in scope.metrics}
    [duration] = found["gen_ai.client.operation.duration"].data.data_points
    assert duration.count == 3 and duration.attributes["gen_ai.operation.name"] == "chat"
    assert duration.attributes["gen_ai.request.model"] == "gpt-test"
    assert found["gen_ai.client.operation.duration"].unit == "s"
    points = found["gen_ai.client.token.usage"].data.data_points
    tokens = {point.attributes["gen_ai.token.type"]: point for point in points}
    assert (tokens["input"].count, tokens["input"].sum) == (3, 30 + 5 + 50)
    assert (tokens["output"].count, tokens["output"].sum) == (3, 8 + 1 + 4)
    assert tokens["output"].attributes["gen_ai.provider.name"] == "openai"


def chat_content(span):
    """A chat span's captured prompt and reply, decoded (None where it holds none)."""
    return {name: json.loads(span.attributes[name]) if name in span.attributes else None
            for name in ("gen_ai.system_instructions", "gen_ai.input.messages", "gen_ai.output.messages")}


@pytest.mark.parametrize("asked_by", ["argument", "environment"])
def test_prompts_and_replies_are_on_chat_spans_when_asked_for(functai_isolated, monkeypatch, asked_by):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    if asked_by == "environment":
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    plugin = otel(provider, capture_content=True) if asked_by == "argument" else otel(provider)
    functai.configure(client=script(), plugins=[plugin])
    support("where is A1?")
    chats = sorted((s for s in exporter.get_finished_spans() if s.name.startswith("chat")), key=lambda s: s.start_time)
    first, last = chat_content(chats[0]), chat_content(chats[-1])
    assert "Answer the customer." in first["gen_ai.system_instructions"][0]["content"]
    [asked] = first["gen_ai.input.messages"]
    assert asked["role"] == "user" and "where is A1?" in asked["parts"][0]["content"]
    [answer] = first["gen_ai.output.messages"]
    assert answer["finish_reason"] == "tool_calls"
    assert [(p["type"], p["name"], p["arguments"]) for p in answer["parts"]] == [
        ("tool_call", "lookup", {"order": "A1"}), ("tool_call", "summarize", {"text": "long text"})]
    roles = [m["role"] for m in last["gen_ai.input.messages"]]
    assert roles == ["user", "assistant", "tool", "tool"]
    assert last["gen_ai.input.messages"][1]["parts"] == [
        {"type": "tool_call", "id": part["id"], "name": part["name"], "arguments": part["arguments"]}
        for part in answer["parts"]]  # the tool calls asked for, as the next request repeats them
    results = [m["parts"][0] for m in last["gen_ai.input.messages"] if m["role"] == "tool"]
    assert results[0]["type"] == "tool_call_response" and "shipped" in results[0]["response"]
    assert last["gen_ai.output.messages"][0]["parts"] == [{"type": "text", "content": "It shipped."}]


def test_prompts_and_replies_stay_off_spans_unless_asked_and_while_the_record_keeps_no_content(
        functai_isolated, monkeypatch):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    functai.configure(client=script(), plugins=[otel(provider)])
    support("where is A1?")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    functai.configure(client=script(), plugins=[otel(provider, capture_content=True)], log_content=False)
    support("where is A1?")
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert len(chats) == 6
    assert all(value is None for span in chats for value in chat_content(span).values())
    assert "where is A1?" not in "".join(s.to_json() for s in exporter.get_finished_spans())


def test_a_tool_interrupted_before_it_ended_is_marked_failed(spans):
    @tool
    def stop() -> str:
        """Stops."""
        raise KeyboardInterrupt

    @ai(tools=[stop])
    def tell(text: str) -> str:
        """Say it."""

    functai.configure(client=ScriptedLM([tool_call("stop", {}), "x"]))
    with pytest.raises(KeyboardInterrupt):
        tell("a")
    tool_span = spans.one("execute_tool stop")
    assert tool_span.status.status_code == StatusCode.ERROR and tool_span.attributes["error.type"] == "interrupted"
    assert spans.one("functai.call tell").status.status_code == StatusCode.ERROR


given_back: list[str] = []


@tool(effects="changes")
def give_back(order: str) -> str:
    """Refund an order."""
    given_back.append(order)
    return f"order {order} refunded"


@ai(tools=[give_back])
def desk(question: str) -> str:
    """Help (a refund waits for a person's approval)."""


def test_a_turn_that_waits_ends_its_spans_and_leaves_no_context_behind(spans, installed_plugins, tmp_path):
    """A waiting turn's call never reaches call_end: its spans end when it waits, and a later call is
    a root again, not a child of a span that never ends."""
    from opentelemetry import trace

    installed_plugins("approval")

    functai.configure(client=ScriptedLM([tool_call("give_back", {"order": "A1"}), "short"]),
                      plugins=[spans.otel])
    with pytest.raises(functai.Waiting):
        desk.conversation("t", store=str(tmp_path), approve="changes")("refund A1")
    assert not trace.get_current_span().get_span_context().is_valid  # nothing of the turn is current
    call = spans.one("functai.call desk")
    assert call.attributes["functai.turn.state"] == "waiting"
    assert parent_of(spans.one("execute_tool give_back")) == call.context.span_id
    summarize("later")
    assert spans.one("functai.call summarize").parent is None


def test_a_processor_that_raises_never_breaks_a_call(functai_isolated, caplog):
    class Raising(SimpleSpanProcessor):
        def on_end(self, span):
            raise ConnectionError("the collector is down")

    provider = TracerProvider()
    provider.add_span_processor(Raising(InMemorySpanExporter()))
    failing = functai.Plugin("down", model_error=lambda failure: Reply(text="from a plugin", finish_reason="stop"))
    for plugins, lm in (([otel(provider)], ScriptedLM(["short"])),
                        ([otel(provider), failing], ScriptedLM([functai.ModelError("down", code="model-http")]))):
        functai.configure(client=lm, plugins=plugins)
        with caplog.at_level("WARNING", logger="functai.otel"):
            assert summarize("x") in ("short", "from a plugin")
    assert "hook failed: plugin=otel" in caplog.text


def test_a_reply_no_model_was_paid_for_now_carries_no_usage(spans, installed_plugins, tmp_path):
    """A resumed turn's reply read back from its record, and a plugin's answer: no tokens on the
    chat span or in the metrics (the reply was paid for when first asked, or never)."""
    canned = Plugin("canned", request=lambda e: Reply(text="short", finish_reason="stop",
                                                      usage={"input_tokens": 1000, "output_tokens": 9}))
    functai.configure(client=ScriptedLM([]), plugins=[canned, spans.otel])
    assert summarize("a long text") == "short"
    assert "gen_ai.usage.input_tokens" not in spans.one("chat scripted").attributes

    installed_plugins("approval")

    paid = Reply(tool_calls=tool_call("give_back", {"order": "A1"}).tool_calls, finish_reason="tool_calls",
                 usage={"input_tokens": 100, "output_tokens": 5})
    functai.configure(client=ScriptedLM([paid, "done"]), plugins=[spans.otel])
    with pytest.raises(functai.Waiting) as waiting:
        desk.conversation("t", store=str(tmp_path), approve="changes")("refund A1")
    waiting.value.turn.approve()
    assert waiting.value.turn.resume() == "done"
    paid_for = [s.attributes.get("gen_ai.usage.input_tokens") for s in spans.all() if s.name.startswith("chat")]
    assert paid_for.count(100) == 1  # the first request, when it was sent; not again when read back


def test_a_hand_edited_change_in_a_record_still_ends_the_calls_span(spans, installed_plugins, tmp_path):
    """A change in a turn's record whose plugin version was edited away (the store's checks let it
    through): the resumed call's span still ends, with the change named as it is."""
    installed_plugins("approval")
    topic = Plugin("topic", context=lambda c: Change(sections=["Be brief."]))

    functai.configure(client=ScriptedLM([tool_call("give_back", {"order": "A1"}), "done"]),
                      plugins=[topic, spans.otel])
    with pytest.raises(functai.Waiting) as waiting:
        desk.conversation("t", store=str(tmp_path), approve="changes")("refund A1")
    path = tmp_path / "t.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines:
        for change in line.get("changes") or ():
            change.pop("version", None)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    turn = desk.conversation("t", store=str(tmp_path)).turn(waiting.value.turn.id)
    turn.approve()
    assert turn.resume() == "done"
    ended = [s for s in spans.named("functai.call desk") if s.attributes.get("functai.turn.state") != "waiting"]
    assert len(ended) == 1 and [e.attributes["functai.plugin"] for e in ended[0].events] == ["topic"]


def test_a_tool_call_approved_at_a_stream_has_one_span(spans, installed_plugins):
    """Approved at the stream, the tool call's hook runs again with the answer: one span covers it."""
    installed_plugins("approval")
    given_back.clear()
    functai.configure(client=ScriptedLM([tool_call("give_back", {"order": "A1"}), "done"]), approve="changes",
                      plugins=[spans.otel])
    with desk.stream("q") as stream:
        for event in stream:
            if event.kind == "waiting":
                stream.approve()
    assert given_back == ["A1"] and len(spans.named("execute_tool give_back")) == 1
