"""Keys per provider, settings servers need, retries and the client cache — over loopback."""

from __future__ import annotations

from typing import Iterator

import pytest
from loopback import LoopbackServer, Received, Scripted, completion, error_body, tool_call

import functai
from functai import ai
from functai._errors import FunctAIError, ModelError
from functai._models import providers
from functai._models.openai import OpenAIClient
from functai._models.request import Request

KEY = "sk-test-SECRET-0123456789"
ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "OLLAMA_API_KEY", "OLLAMA_BASE_URL")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(default=Scripted(body=completion("Lima"))) as srv:
        yield srv


@ai
def capital(country: str) -> str:
    """The capital city of the country."""


def ask(**settings: object) -> Request:
    return Request(model="m", messages=[{"role": "user", "content": "hi"}], settings=settings)


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


# -- 3. keys go only where they belong ----------------------------------------------------


def test_openai_key_is_not_sent_to_ollama(server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    functai.configure(lm="ollama/llama3", base_url=server.url)
    assert capital("Peru") == "Lima"
    assert "authorization" not in server.requests[0].headers


def test_openai_key_goes_to_a_base_url_set_for_openai(server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    functai.configure(lm="openai/gpt-test", base_url=server.url)
    capital("Peru")
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_each_provider_reads_its_own_key_and_base_url(server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "openai-key-not-for-ollama")
    monkeypatch.setenv("OLLAMA_API_KEY", "ollama-key-0123")
    monkeypatch.setenv("OLLAMA_BASE_URL", server.url)
    functai.configure(lm="ollama/llama3")
    capital("Peru")
    assert server.requests[0].headers["authorization"] == "Bearer ollama-key-0123"


def test_every_provider_and_its_variables_are_in_the_docs() -> None:
    import pathlib

    text = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "models.md").read_text()
    for name, info in providers.PROVIDERS.items():
        row = next((line for line in text.splitlines() if line.startswith(f"| `{name}`")), None)
        assert row is not None, name
        assert info.api_key_env in row and info.base_url_env in row, name


# -- issue 9, point 7: an empty model name; a 401 that says where the key came from -----------


@pytest.mark.parametrize("lm", ["openai/", "/gpt-4.1", "ollama/  "])
def test_a_model_name_without_a_model_is_refused(lm: str) -> None:
    functai.configure(lm=lm)
    with pytest.raises(FunctAIError) as info:
        capital("Peru")
    assert info.value.code == "model-name" and repr(lm) in info.value.message


def test_a_401_names_the_variable_the_key_came_from(server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server.default = Scripted(status=401, body=error_body(f"Incorrect API key provided: {KEY}"))
    functai.configure(lm="openai/m", base_url=server.url)
    with pytest.raises(ModelError) as info:
        capital("Peru")
    assert info.value.status == 401 and "OPENAI_API_KEY" in info.value.message
    assert KEY not in str(info.value)


def test_a_401_names_the_setting_or_the_missing_key(server: LoopbackServer) -> None:
    server.default = Scripted(status=401, body=error_body("unauthorized"))
    with OpenAIClient(base_url=server.url, api_key=KEY) as client, pytest.raises(ModelError) as info:
        client.complete(ask())
    assert "the api_key setting" in info.value.message and KEY not in info.value.message
    with OpenAIClient(base_url=server.url, name="ollama", api_key_env="OLLAMA_API_KEY") as client:
        with pytest.raises(ModelError) as info:
            client.complete(ask())
    assert "no key was sent to ollama: set OLLAMA_API_KEY or the api_key setting" in info.value.message


# -- 4. settings servers need -----------------------------------------------------------------


def test_max_completion_tokens_and_request_settings_go_on_the_wire(server: LoopbackServer) -> None:
    functai.configure(lm="openai/gpt-test", base_url=server.url)
    with functai.settings(max_completion_tokens=64, tool_choice="none", parallel_tool_calls=False, seed=7, user="u-1"):
        capital("Peru")
    body = server.requests[0].body
    assert body["max_completion_tokens"] == 64 and "max_tokens" not in body
    assert (body["tool_choice"], body["parallel_tool_calls"], body["seed"], body["user"]) == ("none", False, 7, "u-1")


def test_a_tool_name_as_tool_choice_is_sent_in_the_wire_form(server: LoopbackServer) -> None:
    with OpenAIClient(base_url=server.url) as client:
        client.complete(ask(tool_choice="lookup"))
    assert server.requests[0].body["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}


def honouring_tool_choice(request: Received) -> Scripted:
    """A server that does what tool_choice says: a forced choice always gets a tool call."""
    if request.body.get("tool_choice", "auto") in ("auto", "none"):
        return Scripted(body=completion("Lima"))
    return Scripted(body=completion(None, tool_calls=[tool_call(f"c{len(request.body['messages'])}", "lookup",
                                                                {"country": "Peru"})], finish_reason="tool_calls"))


@pytest.mark.parametrize("choice", ["required", "lookup"])
def test_a_forced_tool_choice_is_sent_once_then_auto_and_recorded(choice: str, tmp_path) -> None:
    looked_up: list[str] = []

    @functai.tool(effects="reads")
    def lookup(country: str) -> str:
        """Facts about a country."""
        looked_up.append(country)
        return "capital: Lima"

    @ai(tools=[lookup])
    def capital_of(country: str) -> str:
        """The capital city of the country."""

    with LoopbackServer(default=honouring_tool_choice) as srv:
        functai.configure(lm="openai/m", base_url=srv.url, tool_choice=choice, log_calls=str(tmp_path))
        value, record = capital_of.run("Peru")
    assert value == "Lima" and looked_up == ["Peru"]  # one tool step, not max_steps of them
    first, second = (r.body["tool_choice"] for r in srv.requests)
    assert first in ("required", {"type": "function", "function": {"name": "lookup"}}) and second == "auto"
    assert record.settings == {"tool_choice": choice, "tool_choice_after_tools": "auto"}
    [logged] = functai.read_calls(tmp_path)
    assert logged.settings == record.settings


def test_auto_tool_choice_is_left_as_set(tmp_path) -> None:
    @functai.tool(effects="reads")
    def lookup(country: str) -> str:
        """Facts about a country."""
        return "capital: Lima"

    @ai(tools=[lookup])
    def capital_of(country: str) -> str:
        """The capital city of the country."""

    with LoopbackServer() as srv:
        srv.script(Scripted(body=completion(None, tool_calls=[tool_call("c1", "lookup", {"country": "Peru"})])),
                   Scripted(body=completion("Lima")))
        functai.configure(lm="openai/m", base_url=srv.url, tool_choice="auto")
        value, record = capital_of.run("Peru")
    assert [r.body["tool_choice"] for r in srv.requests] == ["auto", "auto"]
    assert record.settings == {"tool_choice": "auto"}


def test_max_tokens_is_sent_as_max_completion_tokens_to_openai_reasoning_models(server: LoopbackServer) -> None:
    functai.configure(lm="openai/o3-mini", base_url=server.url, max_tokens=100)
    capital("Peru")
    body = server.requests[0].body
    assert body["max_completion_tokens"] == 100 and "max_tokens" not in body


def test_a_server_that_refuses_max_tokens_gets_max_completion_tokens(server: LoopbackServer) -> None:
    refusal = error_body("Unsupported parameter: 'max_tokens' is not supported with this model. "
                         "Use 'max_completion_tokens' instead.")
    server.script(Scripted(status=400, body=refusal))
    functai.configure(lm="ollama/thinker", base_url=server.url, max_tokens=100)
    assert capital("Peru") == "Lima"
    assert capital("Chile") == "Lima"
    first, second, third = (r.body for r in server.requests)
    assert first["max_tokens"] == 100
    assert second["max_completion_tokens"] == 100 and "max_tokens" not in second
    assert third["max_completion_tokens"] == 100  # remembered for this server and model


def test_headers_are_merged_over_the_defaults_and_never_recorded(server: LoopbackServer, tmp_path) -> None:
    functai.configure(
        lm="openai/m", base_url=server.url, api_key=KEY, log_calls=str(tmp_path),
        headers={"X-Title": "functai-tests", "Accept": "application/json; q=1"},
    )
    value, record = capital.run("Peru")
    got = server.requests[0].headers
    assert got["x-title"] == "functai-tests"
    assert got["accept"] == "application/json; q=1"  # over the default
    assert got["authorization"] == f"Bearer {KEY}"
    log = (tmp_path / "calls.jsonl").read_text()
    assert "functai-tests" not in log and "headers" not in record.settings


def test_a_secret_header_is_scrubbed_from_errors(server: LoopbackServer) -> None:
    token = "gateway-token-0123456789"
    server.default = Scripted(status=403, body=error_body(f"token {token} may not use this model"))
    with OpenAIClient(base_url=server.url, headers={"X-Gateway-Token": token}) as client:
        with pytest.raises(ModelError) as info:
            client.complete(ask())
    assert token not in str(info.value) and "token *** may not" in str(info.value)


def test_organization_and_project_headers_go_to_openai_only(server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_ORG_ID", "org-123")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-456")
    functai.configure(lm="openai/m", base_url=server.url)
    capital("Peru")
    functai.configure(lm="ollama/m")
    capital("Peru")
    to_openai, to_ollama = (r.headers for r in server.requests)
    assert to_openai["openai-organization"] == "org-123" and to_openai["openai-project"] == "proj-456"
    assert "openai-organization" not in to_ollama and "openai-project" not in to_ollama


def test_timeout_and_connect_timeout_reach_the_http_client(server: LoopbackServer) -> None:
    functai.configure(lm="openai/m", base_url=server.url, timeout=7, connect_timeout=0.5)
    capital("Peru")
    client, _ = providers.client_for("openai/m", {"base_url": server.url, "timeout": 7, "connect_timeout": 0.5})
    timeout = client._client().timeout
    assert (timeout.connect, timeout.read, timeout.write) == (0.5, 7, 7)


def test_unknown_settings_still_refuse_with_the_closest_name() -> None:
    with pytest.raises(TypeError, match="did you mean 'max_completion_tokens'"):
        functai.configure(max_completion_token=5)
    with pytest.raises(TypeError, match="did you mean 'connect_timeout'"):
        functai.settings(conect_timeout=5)
    with pytest.raises(TypeError):
        functai.configure(headers={"X-Count": 3})


# -- 7. retries and the client cache ----------------------------------------------------------


@pytest.mark.parametrize("status", [408, 409, 429, 500, 503])
def test_transient_statuses_are_retried(server: LoopbackServer, status: int) -> None:
    server.script(Scripted(status=status, body=error_body("try again")))
    with OpenAIClient(base_url=server.url, sleep=Sleeps()) as client:
        assert client.complete(ask()).text == "Lima"
    assert len(server.requests) == 2


def test_backoff_has_jitter(server: LoopbackServer) -> None:
    server.default = Scripted(status=503, body=error_body("busy"))
    delays = []
    for _ in range(2):
        sleeps = Sleeps()
        with OpenAIClient(base_url=server.url, max_retries=3, backoff=1.0, sleep=sleeps) as client:
            with pytest.raises(ModelError):
                client.complete(ask())
        assert all(step / 2 <= got <= step for step, got in zip([1.0, 2.0, 4.0], sleeps))
        delays.append(tuple(sleeps))
    assert delays[0] != delays[1]  # two clients failing together do not come back together


def test_the_client_cache_is_bounded_and_closes_what_it_drops(server: LoopbackServer) -> None:
    first, _ = providers.client_for("ollama/m", {"base_url": server.url + "/0"})
    first._client()  # opened
    for n in range(1, providers.MAX_CLIENTS + 1):
        providers.client_for("ollama/m", {"base_url": f"{server.url}/{n}"})
    [builtin] = [p for p in providers.manager().get_plugins() if isinstance(p, providers.OpenAICompatible)]
    assert len(builtin._clients.items) == providers.MAX_CLIENTS
    assert first._http is None  # closed when it fell out
    assert len(providers._clients.items) <= providers.MAX_CLIENTS
