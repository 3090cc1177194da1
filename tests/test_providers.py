"""Model names resolve to clients through the functai_client pluggy hook."""

import pytest

import functai
from functai import ai
from functai._models import providers
from functai.testing import ScriptedLM


@pytest.fixture
def fresh_providers(monkeypatch):
    monkeypatch.setattr(providers, "_manager", None)
    monkeypatch.setattr(providers, "_clients", providers._LRU(providers.MAX_CLIENTS, close_evicted=False))


@ai
def capital(country: str) -> str:
    """The capital city."""


def test_a_provider_plugin_adds_a_client(fresh_providers):
    client = ScriptedLM(reply=lambda r: f"answer from {r.model}")
    asked = []

    class Acme:
        @functai.providerimpl
        def functai_client(self, provider, model, settings):
            asked.append((provider, model, dict(settings)))
            return client if provider == "acme" else None

    functai.register_provider(Acme())
    functai.configure(lm="acme/rocket-1", timeout=5)
    assert capital("Peru") == "answer from rocket-1"
    assert capital("France") == "answer from rocket-1"
    assert asked == [("acme", "rocket-1", {"timeout": 5})]  # clients are reused


def test_builtin_providers_and_bare_names(fresh_providers):
    from functai._models.openai import OpenAIClient

    client, model = providers.client_for("gpt-4.1-mini", {})
    assert isinstance(client, OpenAIClient) and model == "gpt-4.1-mini" and client.name == "openai"
    client, model = providers.client_for("ollama/llama3:8b", {})
    assert client.base_url == "http://localhost:11434/v1" and model == "llama3:8b"
    same, _ = providers.client_for("ollama/other", {})
    assert same is client
    other, _ = providers.client_for("ollama/llama3", {"base_url": "http://127.0.0.1:9/v1"})
    assert other is not client and other.base_url == "http://127.0.0.1:9/v1"


def test_client_setting_wins_over_the_model_name():
    client = ScriptedLM(["Lima"])
    functai.configure(lm="nowhere/model", client=client)
    value, record = capital.run("Peru")
    assert value == "Lima" and record.model == "nowhere/model"
    assert client.requests[0].model == "nowhere/model"
