"""The client against an independent OpenAI-compatible mock server from PyPI: fakellm.

fakellm (a FastAPI app under uvicorn) answers ``/v1/chat/completions`` from
YAML rules, tool calls included; the test starts it on 127.0.0.1 on a free
port, so the wire format is checked against a server functai did not write.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import textwrap
import time
from typing import Iterator

import httpx
import pytest

import functai
from functai import ai

CONFIG = textwrap.dedent("""\
    version: 1
    rules:
      - name: tool_result_seen
        when:
          tool_result_contains: "10.1 million"
        respond:
          content: "About 10.1 million people live in Lima."
      - name: ask_for_the_tool
        when:
          tools_include: lookup_population
        respond:
          tool_calls:
            - name: lookup_population
              arguments: {city: "Lima"}
      - name: typed
        when:
          messages_contain: "the capital, with its population"
        respond:
          content: '{"name": "Lima", "people": 10100000}'
      - name: text
        when:
          messages_contain: "country: Peru"
        respond:
          content: "Lima"
""")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def fakellm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("fakellm")
    (folder / "fakellm.yaml").write_text(CONFIG)
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", "from fakellm.cli import main; main()", "serve",
         "--host", "127.0.0.1", "--port", str(port), "--config", str(folder / "fakellm.yaml")],
        cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")},
    )
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise AssertionError(f"fakellm exited: {process.stdout.read().decode(errors='replace')}")
            try:
                if httpx.get(f"{root}/_fakellm/stats", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("fakellm did not start within 60 s")
            time.sleep(0.1)
        yield f"{root}/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture(autouse=True)
def _model(fakellm: str) -> None:
    httpx.post(fakellm.removesuffix("/v1") + "/_fakellm/reset", timeout=5)
    functai.configure(lm="openai/gpt-4o-mini", base_url=fakellm, api_key="not-used-by-fakellm", http_retries=0)


@dataclasses.dataclass
class City:
    name: str
    people: int


@ai
def capital(country: str) -> str:
    """The capital city of the country."""


@ai
def city(country: str) -> City:
    """Name the capital, with its population."""


@functai.tool(effects="reads")
def lookup_population(city: str) -> str:
    """The population of a city."""
    return {"Lima": "10.1 million"}.get(city, "unknown")


@ai(tools=[lookup_population])
def population(city: str) -> str:
    """How many people live in the city? Look it up."""


def test_text() -> None:
    value, record = capital.run("Peru")
    assert value == "Lima"
    assert record.finish_reason == "stop" and record.usage["input_tokens"] > 0


def test_typed_output() -> None:
    value, record = city.run("Peru")
    assert value == City("Lima", 10_100_000)
    assert record.attempts == 1


def test_one_tool_round_trip() -> None:
    value, record = population.run("Lima")
    assert value == "About 10.1 million people live in Lima."
    [call] = record.tool_calls
    assert call["name"] == "lookup_population" and call["input"] == {"city": "Lima"}
    assert call["output"] == "10.1 million"
    assert record.attempts == 2
