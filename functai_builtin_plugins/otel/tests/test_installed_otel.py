"""functai-otel installed for real: pip installs it into a fresh venv, and an
application that configures the OpenTelemetry SDK sees the span tree of its calls."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.venv  # slow: `python -m pytest -m "not venv"` leaves these out

ROOT = pathlib.Path(__file__).resolve().parents[3]
OTEL = ROOT / "functai_builtin_plugins" / "otel"

APPLICATION = textwrap.dedent('''
    import json

    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    import functai
    from functai import Reply, ai, tool
    from functai.testing import ScriptedLM, tool_calls

    @tool(effects="reads")
    def lookup(order: str) -> str:
        """Look an order up."""
        return "shipped"

    @ai
    def summarize(text: str) -> str:
        """Summarize."""

    @ai(tools=[lookup, summarize])
    def support(question: str) -> str:
        """Answer the customer."""

    functai.configure(lm="openai/gpt-test", api_key="sk-venv-SECRET-KEY", client=ScriptedLM([
        Reply(tool_calls=tool_calls([("lookup", {"order": "A1"}), ("summarize", {"text": "t"})]).tool_calls,
              finish_reason="tool_calls", usage={"input_tokens": 7, "output_tokens": 2}),
        Reply(text="short", finish_reason="stop"),
        Reply(text="It shipped.", finish_reason="stop", usage={"input_tokens": 9, "output_tokens": 3}),
    ]))
    with trace.get_tracer("app").start_as_current_span("handler"):
        answer = support("where is A1?")
    spans = exporter.get_finished_spans()
    names = {span.context.span_id: span.name for span in spans}
    print(json.dumps({
        "answer": answer,
        "tree": sorted([span.name, names.get(span.parent.span_id) if span.parent else None] for span in spans),
        "support": dict(next(s for s in spans if s.name == "functai.call support").attributes),
        "dump": "".join(span.to_json() for span in spans),
    }))
''')


def pip(python, *args):
    return [str(python), "-m", "pip", *args, "-q", "--disable-pip-version-check"]


def test_installed_functai_otel_traces_a_call_with_a_tool_and_a_nested_function(tmp_path, source_copy):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    otel = source_copy / OTEL.relative_to(ROOT)
    subprocess.run([*pip(python, "install"), str(source_copy), str(otel), "opentelemetry-sdk"], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUNCTAI_")}
    result = subprocess.run([str(python), "-c", APPLICATION], capture_output=True, text=True, cwd=str(tmp_path),
                            env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["answer"] == "It shipped."
    assert data["tree"] == sorted([
        ["handler", None],
        ["functai.call support", "handler"],
        ["chat gpt-test", "functai.call support"],
        ["execute_tool lookup", "functai.call support"],
        ["execute_tool summarize", "functai.call support"],
        ["functai.call summarize", "execute_tool summarize"],
        ["chat gpt-test", "functai.call summarize"],
        ["chat gpt-test", "functai.call support"],
    ])
    assert data["support"]["gen_ai.usage.input_tokens"] == 16
    assert data["support"]["gen_ai.request.model"] == "gpt-test"  # as its chat spans name it
    assert data["support"]["gen_ai.provider.name"] == "openai"
    assert "sk-venv-SECRET-KEY" not in data["dump"]

    listing = subprocess.run([str(venv / "bin" / "functai"), "plugins", "--json"], capture_output=True, text=True,
                             env=env)
    assert listing.returncode == 0, listing.stderr
    [otel] = [p for p in json.loads(listing.stdout)["plugins"] if p["name"] == "otel"]
    assert otel["state"] == "loaded" and otel["distribution"] == "functai-otel"
    assert otel["hooks"] == ["before_call", "request", "model_error", "reply", "tool_call", "tool_result", "call_end",
                             "turn_wait"]
