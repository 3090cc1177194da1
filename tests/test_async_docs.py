"""docs/async.md: its web endpoint example, run with Starlette's TestClient."""

import json

import functai_approval
import pytest
from starlette.testclient import TestClient

import functai
from functai.testing import ScriptedLM, tool_call

from test_docs_blocks import blocks


def example():
    return next(block for block in blocks("docs/async.md") if "StreamingResponse" in block.code)


def events(response):
    return [json.loads(line[len("data: "):]) for line in response.text.splitlines() if line.startswith("data: ")]


@pytest.fixture
def app(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "docs_async_example"}
    found = example()
    exec(compile("\n" * (found.line - 1) + found.code, found.page, "exec"), namespace)
    return namespace


def test_the_endpoint_streams_a_turn_as_server_sent_events(app, tmp_path):
    functai.configure(client=ScriptedLM(["Paris is the capital."], chunk=6))
    with TestClient(app["app"]) as client:
        response = client.post("/ask", json={"user": "alex", "question": "Capital of France?"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    got = events(response)
    assert "".join(e["text"] for e in got if "text" in e) == "Paris is the capital."
    assert len([e for e in got if "text" in e]) > 1  # streamed in pieces
    chat = app["assistant"].conversation("alex", store=tmp_path / "chats")
    assert got[-1] == {"done": chat.head.id}
    assert chat.head.outputs["output"] == "Paris is the capital."


def test_a_turn_that_waits_is_reported_and_saved(app, tmp_path, install):
    install(functai_approval.plugin)

    @functai.tool(effects="changes")
    def refund(order: str) -> str:
        """Refund an order."""
        return "refunded"

    assistant = app["assistant"]
    app["assistant"] = functai.ai(tools=[refund])(assistant.fn)
    functai.configure(client=ScriptedLM([tool_call("refund", {"order": "A1"}), "done"]), approve="changes")
    with TestClient(app["app"]) as client:
        got = events(client.post("/ask", json={"user": "sam", "question": "refund A1"}))
    chat = app["assistant"].conversation("sam", store=tmp_path / "chats")
    assert got == [{"waiting": chat.head.id}]
    assert chat.head.state == "waiting"
