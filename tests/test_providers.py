"""Model names resolve to clients through the functai_client pluggy hook."""

import pytest

import functai
from functai import ai
from functai._models import providers
from functai.testing import ScriptedLM, log_events


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


class _EntryPoint:
    def __init__(self, name, load):
        self.name, self.load = name, load


def test_a_provider_entry_point_that_fails_to_load_is_left_out_and_named(fresh_providers, monkeypatch):
    def broken():
        raise ModuleNotFoundError("No module named 'acme_sdk'")

    def exits():
        raise SystemExit(1)

    monkeypatch.setattr(providers, "_entry_points", lambda: [_EntryPoint("acme", broken), _EntryPoint("bye", exits)])
    with log_events() as events:
        client, _ = providers.client_for("ollama/llama3", {})  # the built-ins still answer
    assert client.name == "ollama"
    assert [fields["provider"] for event, fields in events if event == "provider failed to load"] == ["acme", "bye"]
    with pytest.raises(functai.FunctAIError) as info:
        providers.client_for("acme/rocket-1", {})
    assert info.value.code == "model-provider"
    assert "the provider plugin 'acme' failed to load (ModuleNotFoundError: No module named 'acme_sdk')" in str(info.value)


def test_a_provider_plugin_that_raises_is_model_provider_without_the_key(fresh_providers):
    key = "sk-provider-secret-123456"

    class Leaky:
        @functai.providerimpl
        def functai_client(self, provider, model, settings):
            raise RuntimeError(f"bad key {settings['api_key']}")

    functai.register_provider(Leaky())
    with pytest.raises(functai.FunctAIError) as info:
        providers.client_for("acme/rocket-1", {"api_key": key})
    assert info.value.code == "model-provider" and "RuntimeError: bad key ***" in str(info.value)
    assert key not in str(info.value) and info.value.__cause__ is None


def test_a_clients_own_exception_quoting_its_key_is_kept_without_it(fresh_providers, tmp_path):
    """A provider's client is given the key; an exception of its own that quotes it reaches the
    call log and a conversation's store with the key cut out."""
    key = "sk-LIVE-SECRET-0123456789"

    class Refusing:
        def __init__(self, key):
            self.key = key

        def complete(self, request):
            raise ConnectionError(f"gateway refused token {self.key}")

    class Gateway:
        @functai.providerimpl
        def functai_client(self, provider, model, settings):
            return Refusing(settings.get("api_key")) if provider == "gw" else None

    functai.register_provider(Gateway())
    with functai.settings(lm="gw/m", api_key=key, log_calls=str(tmp_path / "calls")):
        with pytest.raises(ConnectionError):
            capital("Peru")
        with pytest.raises(ConnectionError):
            capital.conversation("c", store=str(tmp_path / "store"))("Peru")
    kept = (tmp_path / "calls" / "calls.jsonl").read_text() + (tmp_path / "store" / "c.jsonl").read_text()
    assert "gateway refused token ***" in kept and key not in kept


def test_a_tools_ai_function_whose_client_quotes_its_key_fails_the_tool_without_it(fresh_providers, tmp_path):
    """An AI function used as a tool: its client's exception becomes the tool's failure, which the
    model is shown and the store and call log keep, with the key cut out as in the call's own record."""
    key = "sk-LIVE-SECRET-0123456789"

    class Refusing:
        def __init__(self, key):
            self.key = key

        def complete(self, request):
            if request.messages[0]["content"].startswith("Look"):
                raise ConnectionError(f"gateway refused token {self.key}")
            last = request.messages[-1]
            if last["role"] == "tool":
                return functai.Reply(text=last["content"], finish_reason="stop")
            return functai.testing.tool_call("research", {"query": "x"})

    class Gateway:
        @functai.providerimpl
        def functai_client(self, provider, model, settings):
            return Refusing(settings.get("api_key")) if provider == "gw" else None

    @functai.ai
    def research(query: str) -> str:
        """Look things up."""

    @functai.ai(tools=[research])
    def assistant(request: str) -> str:
        """Help."""

    functai.register_provider(Gateway())
    with functai.settings(lm="gw/m", api_key=key, headers={"X-Key": key}, log_calls=str(tmp_path / "calls")):
        shown = assistant.conversation("c", store=str(tmp_path / "store"))("go")
    kept = (tmp_path / "calls" / "calls.jsonl").read_text() + (tmp_path / "store" / "c.jsonl").read_text()
    assert "gateway refused token ***" in shown and key not in shown  # the tool's result, which the model read
    assert "gateway refused token ***" in kept and key not in kept


def test_two_provider_entry_points_of_one_name_load_the_first_not_a_failure(fresh_providers, monkeypatch):
    class Serves:
        def __init__(self, text):
            self.text = text

        @functai.providerimpl
        def functai_client(self, provider, model, settings):
            return ScriptedLM([self.text]) if provider == "gw" else None

    monkeypatch.setattr(providers, "_entry_points", lambda: [_EntryPoint("gateway", lambda: Serves("first")),
                                                            _EntryPoint("gateway", lambda: Serves("second"))])
    with log_events() as events:
        client, _ = providers.client_for("gw/m", {})
    assert providers.failed == {} and not [e for e, _ in events if e == "provider failed to load"]
    assert client.complete(functai.Request(model="m", messages=[])).text == "first"
