"""functai-otel's spans against real requests (the loopback server) and the GenAI semantic conventions.

Every attribute name the plugin sets is checked against the
``opentelemetry-semantic-conventions`` package, and the values it gives the
enumerated attributes against that package's enumerations.
"""

import pathlib
import sys

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes
from opentelemetry.semconv.attributes import error_attributes, server_attributes
from opentelemetry.trace import StatusCode

import functai
import functai_otel
from functai import Reply, ai, tool
from functai.testing import ScriptedLM, tool_call
from functai_otel import names, otel

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "tests"))
from loopback import LoopbackServer, Scripted, completion, error_body  # noqa: E402
from loopback import tool_call as wire_tool_call  # noqa: E402

#: Every attribute name the conventions define in the groups the plugin uses.
CONVENTIONS = {
    value for module in (gen_ai_attributes, server_attributes, error_attributes)
    for name, value in vars(module).items() if name.isupper() and isinstance(value, str)
}


@pytest.fixture
def spans(functai_isolated):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    functai.configure(plugins=[otel(provider)], api_key="sk-loopback-KEY-0123456789")

    class Spans:
        tracer_provider = provider

        def all(self):
            return list(exporter.get_finished_spans())

        def named(self, prefix):
            return [s for s in self.all() if s.name.startswith(prefix)]

        def one(self, prefix):
            [span] = self.named(prefix)
            return span

    return Spans()


@pytest.fixture
def server():
    with LoopbackServer() as srv:
        yield srv


@tool(effects="reads")
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped"


@ai
def capital(country: str) -> str:
    """The capital city of the country."""


@ai
def population(country: str) -> int:
    """How many people live in the country."""


@ai(tools=[lookup])
def support(question: str) -> str:
    """Answer the customer."""


def parent_of(span):
    return span.parent.span_id if span.parent is not None else None


def test_a_request_the_server_refuses_has_a_chat_span_with_its_error(spans, server):
    server.script(Scripted(status=400, body=error_body("max_tokens is too large")))
    functai.configure(lm="openai/gpt-x", base_url=server.url, max_completion_tokens=5)
    with pytest.raises(functai.FunctAIError) as info:
        capital("Peru")
    assert info.value.code == "model-http"
    call, chat = spans.one("functai.call"), spans.one("chat")
    assert chat.name == "chat gpt-x" and parent_of(chat) == call.context.span_id
    assert chat.attributes["error.type"] == "model-http" and chat.status.status_code == StatusCode.ERROR
    assert chat.attributes["gen_ai.request.model"] == "gpt-x"
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.attributes["gen_ai.request.max_tokens"] == 5
    assert chat.attributes["server.address"] == "127.0.0.1" and chat.attributes["server.port"] == server.port
    assert chat.attributes["functai.attempt"] == 1
    assert call.start_time <= chat.start_time <= chat.end_time <= call.end_time
    assert call.attributes["error.type"] == "model-http"


def test_a_request_rate_limited_past_its_retries_is_one_failed_chat_span(spans, server):
    busy = Scripted(status=429, body=error_body("slow down", "rate_limit_exceeded"), headers={"retry-after": "0"})
    server.script(busy, busy)
    functai.configure(lm="openai/gpt-x", base_url=server.url, http_retries=1)
    with pytest.raises(functai.FunctAIError):
        capital("Peru")
    assert len(server.requests) == 2  # the client's own retry: one model request, one span
    chat = spans.one("chat")
    assert chat.attributes["error.type"] == "model-http" and chat.status.status_code == StatusCode.ERROR


def test_a_request_that_fails_after_a_tool_step_is_the_second_chat_span(spans, server):
    server.script(Scripted(body=completion(None, tool_calls=[wire_tool_call("c1", "lookup", {"order": "A1"})],
                                           finish_reason="tool_calls")),
                  Scripted(status=400, body=error_body("context too long")))
    functai.configure(lm="openai/gpt-x", base_url=server.url)
    with pytest.raises(functai.FunctAIError):
        support("where is A1?")
    first, second = sorted(spans.named("chat"), key=lambda s: s.start_time)
    assert first.status.status_code == StatusCode.UNSET and first.attributes["functai.attempt"] == 1
    assert second.status.status_code == StatusCode.ERROR and second.attributes["functai.attempt"] == 2
    assert spans.one("execute_tool lookup").end_time <= second.start_time


def test_request_and_response_attributes_from_a_real_exchange(spans, server):
    server.script(Scripted(body=completion("Lima", model="gpt-x-2025-01-01", usage={
        "prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49,
        "prompt_tokens_details": {"cached_tokens": 32}, "completion_tokens_details": {"reasoning_tokens": 6}})))
    functai.configure(lm="openai/gpt-x", base_url=server.url, max_completion_tokens=64, stop=["\n\n", "END"],
                      temperature=0.5, seed=7)
    capital("Peru")
    call, chat = spans.one("functai.call"), spans.one("chat")
    assert dict(chat.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-x",
        "gen_ai.output.type": "text",
        "gen_ai.request.max_tokens": 64,
        "gen_ai.request.stop_sequences": ("\n\n", "END"),
        "gen_ai.request.temperature": 0.5,
        "gen_ai.request.seed": 7,
        "server.address": "127.0.0.1",
        "server.port": server.port,
        "gen_ai.response.id": "chatcmpl-loopback",
        "gen_ai.response.model": "gpt-x-2025-01-01",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 40,
        "gen_ai.usage.output_tokens": 9,
        "gen_ai.usage.cache_read.input_tokens": 32,
        "gen_ai.usage.reasoning.output_tokens": 6,
        "functai.path": "capital",
        "functai.attempt": 1,
    }
    # the call span names the model as its chat spans do: without the provider prefix
    assert call.attributes["gen_ai.request.model"] == "gpt-x" and call.attributes["gen_ai.provider.name"] == "openai"
    assert call.attributes["gen_ai.usage.cache_read.input_tokens"] == 32


def test_a_streamed_reply_gives_the_same_response_attributes(spans, server):
    from loopback import chunks

    server.script(Scripted(events=chunks("Li", "ma", usage={"prompt_tokens": 3, "completion_tokens": 2})))
    functai.configure(lm="openai/gpt-x", base_url=server.url)
    with capital.stream("Peru") as stream:
        assert "".join(event.text for event in stream if event.kind == "text") == "Lima"
    chat = spans.one("chat")
    assert chat.attributes["gen_ai.response.id"] == "chatcmpl-loopback"
    assert chat.attributes["gen_ai.response.model"] == "loopback"


def test_azure_is_named_as_the_conventions_name_it(spans, server, monkeypatch):
    monkeypatch.delenv("AZURE_OPENAI_API_VERSION", raising=False)
    server.script(Scripted(body=completion("Lima")))
    functai.configure(lm="azure/gpt4o-prod", base_url=server.root + "/openai")
    capital("Peru")
    for span in (spans.one("chat"), spans.one("functai.call")):
        assert span.attributes["gen_ai.provider.name"] == "azure.ai.openai"
        assert span.attributes["gen_ai.request.model"] == "gpt4o-prod"


def test_json_output_and_tool_type(spans):
    functai.configure(client=ScriptedLM([tool_call("lookup", {"order": "A1"}), "It shipped."]))
    support("where is A1?")
    assert spans.one("execute_tool lookup").attributes["gen_ai.tool.type"] == "function"
    functai.configure(client=ScriptedLM(["33"]))
    assert population("Peru") == 33
    assert spans.named("chat")[-1].attributes["gen_ai.output.type"] == "json"


def test_every_attribute_name_is_one_of_the_conventions(spans, server):
    """What the scenarios above set, and every name the plugin's table holds."""
    functai.configure(plugins=[otel(spans.tracer_provider, capture_content=True)])  # prompts and replies too
    server.script(Scripted(body=completion(None, tool_calls=[wire_tool_call("c1", "lookup", {"order": "A1"})],
                                           finish_reason="tool_calls", usage={"prompt_tokens": 1})),
                  Scripted(status=400, body=error_body("no")))
    functai.configure(lm="openai/gpt-x", base_url=server.url, temperature=0.1, top_p=0.9, stop="END",
                      presence_penalty=0.1, frequency_penalty=0.1, max_tokens=9, seed=1)
    with pytest.raises(functai.FunctAIError):
        support("where is A1?")
    usage = {"input_tokens": 1, "output_tokens": 1, "cached_tokens": 1, "reasoning_tokens": 1}
    chat = ScriptedLM([Reply(text="12", finish_reason="stop", usage=usage, id="r1", model="m1")])
    with functai.settings(client=chat, lm="openai/gpt-y"):
        population.conversation("alex")("Peru")
    used = {key for span in spans.all() for key in span.attributes}
    ours = {key for key in used if key.startswith("functai.")}
    assert used - ours <= CONVENTIONS, sorted(used - ours - CONVENTIONS)
    table = {value for name, value in vars(names).items() if name.isupper() and isinstance(value, str)}
    table |= set(names.SETTINGS.values()) | set(names.USAGE.values())
    table = {name for name in table if not name.startswith("functai.")}
    assert table <= CONVENTIONS, sorted(table - CONVENTIONS)
    assert table <= used, sorted(table - used)  # the scenarios reach every name the table holds
    values = {(key, span.attributes[key]) for span in spans.all() for key in
              ("gen_ai.operation.name", "gen_ai.output.type", "gen_ai.provider.name", "gen_ai.tool.type")
              if key in span.attributes}
    enumerations = {
        "gen_ai.operation.name": gen_ai_attributes.GenAiOperationNameValues,
        "gen_ai.output.type": gen_ai_attributes.GenAiOutputTypeValues,
        "gen_ai.provider.name": gen_ai_attributes.GenAiProviderNameValues,
    }
    for key, value in values:
        if key in enumerations:
            assert value in {member.value for member in enumerations[key]}, (key, value)
    assert ("gen_ai.tool.type", "function") in values  # the conventions' word for a function tool
    assert functai_otel.names.provider_name("azure") == gen_ai_attributes.GenAiProviderNameValues.AZURE_AI_OPENAI.value


@pytest.mark.parametrize("way", ["sync", "async"])
def test_an_instrumented_http_clients_span_is_the_chat_spans_child_and_sends_its_traceparent(spans, server, way):
    """With OpenTelemetry's httpx instrumentation on, each HTTP request of a model request is a child
    of its chat span, and the server is sent a ``traceparent`` naming that HTTP span — on the sync
    client (httpx's own pool) and the async one (functai's lean pool) alike."""
    import asyncio

    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    busy = Scripted(status=500, body=error_body("try again", "server_error"))
    server.script(busy, Scripted(body=completion("Lima")))
    functai.configure(lm="openai/gpt-x", base_url=server.url, http_retries=1)
    instrumentor = HTTPXClientInstrumentor()
    instrumentor.instrument(tracer_provider=spans.tracer_provider)
    try:
        assert (capital("Peru") if way == "sync" else asyncio.run(capital.acall("Peru"))) == "Lima"
    finally:
        instrumentor.uninstrument()
    chat = spans.one("chat")
    http = [s for s in spans.all() if s.kind.name == "CLIENT" and s is not chat]
    assert len(http) == 2  # the client's own retry: two HTTP requests, one model request
    assert all(parent_of(s) == chat.context.span_id for s in http)
    sent = [request.headers["traceparent"].split("-")[1:3] for request in server.requests]  # trace id, parent id
    assert sent == [[f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}"]
                    for s in sorted(http, key=lambda s: s.start_time)]
    assert chat.start_time <= min(s.start_time for s in http) and max(s.end_time for s in http) <= chat.end_time
