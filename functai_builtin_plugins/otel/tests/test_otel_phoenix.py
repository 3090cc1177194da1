"""Spans sent over OTLP/HTTP to a real receiver, Arize Phoenix, started offline by the test, and the
tree a person sees there: its span kinds, parents, token counts and messages.

Phoenix is installed once into a venv of its own (about 900 MB; reused from the cache folder
while it imports), then served on free loopback ports with a throw-away working folder.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import functai
from functai import Reply, ai, tool
from functai.testing import ScriptedLM, tool_calls
from functai_otel import otel

pytestmark = pytest.mark.venv  # slow: `python -m pytest -m "not venv"` leaves these out

PHOENIX = "arize-phoenix==20.26.1"  # the receiver these checks were written against
CACHE = pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache") / "functai-tests"
KEY = "sk-phoenix-KEY-0123456789abcdef"


def phoenix_python() -> pathlib.Path:
    """The Python of a venv with Phoenix: made once, kept in the cache folder while it imports."""
    venv = CACHE / f"{PHOENIX.replace('==', '-')}-py{sys.version_info[0]}{sys.version_info[1]}"
    python = venv / "bin" / "python"
    ready = venv / "functai-ready"
    if ready.exists() and subprocess.run([str(python), "-c", "import phoenix"], capture_output=True).returncode == 0:
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", PHOENIX], check=True)
    ready.write_text(PHOENIX)
    return python


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    python = phoenix_python()
    work = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    environment = {**os.environ, "PHOENIX_WORKING_DIR": str(work), "PHOENIX_HOST": "127.0.0.1",
                   "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(free_port()),
                   "PHOENIX_TELEMETRY_ENABLED": "false"}
    log = (work / "phoenix.log").open("wb")
    server = subprocess.Popen([str(python), "-m", "phoenix.server.main", "serve"], env=environment, cwd=work,
                              stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            if server.poll() is not None:
                pytest.fail(f"Phoenix exited ({server.returncode}): {(work / 'phoenix.log').read_text()[-2000:]}")
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"Phoenix did not start in 240 s: {(work / 'phoenix.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@tool(effects="reads")
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped"


@ai
def summarize(text: str) -> str:
    """Summarize the text in a few words."""


@ai(tools=[lookup, summarize])
def support(question: str) -> str:
    """Answer the customer."""


def spans_in(phoenix: str, project: str, count: int) -> list[dict]:
    """The project's spans as Phoenix's REST API gives them, once ``count`` have arrived."""
    deadline = time.monotonic() + 60
    while True:
        response = httpx.get(f"{phoenix}/v1/projects/{project}/spans", params={"limit": 100}, timeout=10)
        found = response.json()["data"] if response.status_code == 200 else []
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def test_a_calls_spans_reach_phoenix_as_the_tree_a_person_reads(functai_isolated, phoenix):
    provider = TracerProvider(resource=Resource.create({"service.name": "support-desk",
                                                        "openinference.project.name": "functai-otlp"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{phoenix}/v1/traces")))
    lm = ScriptedLM([
        Reply(tool_calls=tool_calls([("lookup", {"order": "A1"}), ("summarize", {"text": "long text"})]).tool_calls,
              finish_reason="tool_calls", usage={"input_tokens": 30, "output_tokens": 8}),
        Reply(text="short", finish_reason="stop", usage={"input_tokens": 5, "output_tokens": 1}),
        Reply(text="It shipped.", finish_reason="stop", usage={"input_tokens": 50, "output_tokens": 4}),
    ])
    functai.configure(client=lm, lm="openai/gpt-test", api_key=KEY,
                      plugins=[otel(provider, capture_content=True)])
    with provider.get_tracer("support-desk").start_as_current_span("POST /support"):
        assert support("where is A1?") == "It shipped."
    provider.force_flush()
    spans = spans_in(phoenix, "functai-otlp", 8)

    by_id = {s["context"]["span_id"]: s for s in spans}
    shown = sorted((s["name"], s["span_kind"], by_id[s["parent_id"]]["name"] if s["parent_id"] else None)
                   for s in spans)
    assert shown == sorted([
        ("POST /support", "UNKNOWN", None),
        ("functai.call support", "AGENT", "POST /support"),
        ("chat gpt-test", "LLM", "functai.call support"),
        ("execute_tool lookup", "TOOL", "functai.call support"),
        ("execute_tool summarize", "TOOL", "functai.call support"),
        ("functai.call summarize", "AGENT", "execute_tool summarize"),
        ("chat gpt-test", "LLM", "functai.call summarize"),
        ("chat gpt-test", "LLM", "functai.call support"),
    ])
    assert len({s["context"]["trace_id"] for s in spans}) == 1
    last = max((s for s in spans if s["name"] == "chat gpt-test"), key=lambda s: s["start_time"])
    attributes = last["attributes"]
    assert (attributes["llm.token_count.prompt"], attributes["llm.token_count.completion"]) == (50, 4)
    assert attributes["llm.model_name"] == "gpt-test" and attributes["llm.provider"] == "openai"
    said = {key: value for key, value in attributes.items() if key.startswith("llm.input_messages.")}
    assert said["llm.input_messages.1.message.content"] == "question: where is A1?"
    assert said["llm.input_messages.3.message.content"] == "order A1: shipped"
    assert attributes["llm.output_messages.0.message.content"] == "It shipped."
    assert KEY not in json.dumps(spans) and "KEY-0123" not in json.dumps(spans)
