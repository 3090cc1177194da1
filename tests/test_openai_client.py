"""OpenAIClient against a real loopback chat-completions server."""

from __future__ import annotations

import json
import threading
from typing import Iterator

import pytest
from loopback import LoopbackServer, Scripted, completion, error_body, refused_url, tool_call

import functai
from functai._errors import FunctAIError, ModelError
from functai._models.openai import OpenAIClient
from functai._models.request import Reply, Request
from functai._models.toolcall import ToolCall

KEY = "sk-test-SECRET-0123456789"


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # The developer's own OpenAI settings must not leak into tests.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


class Sleeps(list[float]):
    """A fake sleep that records what it was asked to wait."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def make(server: LoopbackServer, **kwargs: object) -> OpenAIClient:
    kwargs.setdefault("base_url", server.url)
    kwargs.setdefault("api_key", KEY)
    kwargs.setdefault("sleep", Sleeps())
    return OpenAIClient(**kwargs)  # type: ignore[arg-type]


def ask(text: str = "hi", **kwargs: object) -> Request:
    return Request(model="m", messages=[{"role": "user", "content": text}], **kwargs)  # type: ignore[arg-type]


# -- the happy paths ---------------------------------------------------------


def test_text_reply_and_exact_wire_body(server: LoopbackServer) -> None:
    server.reply("Hello!", usage={"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15})
    request = Request(
        model="gpt-test",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Say hello."},
        ],
        settings={"temperature": 0.2, "max_tokens": 50, "seed": 7, "stop": ["\n\n"], "top_p": 0.9},
    )
    with make(server) as client:
        reply = client.complete(request)

    assert reply == Reply(
        text="Hello!", usage={"input_tokens": 12, "output_tokens": 3, "total_tokens": 15}, finish_reason="stop"
    )
    [got] = server.requests
    assert got.method == "POST"
    assert got.path == "/v1/chat/completions"
    assert got.headers["authorization"] == f"Bearer {KEY}"
    assert got.headers["content-type"] == "application/json"
    assert got.body == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Say hello."},
        ],
        "temperature": 0.2,
        "max_tokens": 50,
        "seed": 7,
        "stop": ["\n\n"],
        "top_p": 0.9,
    }


def test_settings_cannot_override_model_or_messages(server: LoopbackServer) -> None:
    server.reply("x")
    with make(server) as client:
        client.complete(ask(settings={"model": "other", "messages": [], "logprobs": True}))
    body = server.requests[0].body
    assert body["model"] == "m"
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["logprobs"] is True  # unknown settings pass through


def test_integer_output_schema_is_wrapped_and_reply_unwrapped(server: LoopbackServer) -> None:
    server.reply('{"value": 42}')
    with make(server) as client:
        reply = client.complete(ask(output_schema={"type": "integer"}))

    assert reply.text == "42"
    assert server.requests[0].body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "output",
            "schema": {
                "type": "object",
                "properties": {"value": {"type": "integer"}},
                "required": ["value"],
                "additionalProperties": False,
            },
            "strict": True,  # the schema qualifies, so the server enforces it
        },
    }


def test_object_output_schema_is_sent_as_is(server: LoopbackServer) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    }
    server.reply('{"name": "Ada", "age": 36}')
    with make(server) as client:
        reply = client.complete(ask(output_schema=schema))

    assert reply.text == '{"name": "Ada", "age": 36}'  # untouched
    sent = server.requests[0].body["response_format"]["json_schema"]
    assert sent["schema"] == {**schema, "additionalProperties": False} and sent["strict"] is True
    assert "additionalProperties" not in schema  # the caller's schema is not mutated


def test_array_schema_keeps_defs_at_the_top(server: LoopbackServer) -> None:
    item = {"type": "object", "properties": {"x": {"type": "integer"}}}
    schema = {"type": "array", "items": {"$ref": "#/$defs/Item"}, "$defs": {"Item": item}}
    server.reply('{"value": [{"x": 1}, {"x": 2}]}')
    with make(server) as client:
        reply = client.complete(ask(output_schema=schema))

    assert json.loads(reply.text or "") == [{"x": 1}, {"x": 2}]
    sent = server.requests[0].body["response_format"]["json_schema"]["schema"]
    assert sent["$defs"] == {"Item": {**item, "required": ["x"], "additionalProperties": False}}  # refs resolve
    assert sent["properties"]["value"] == {"type": "array", "items": {"$ref": "#/$defs/Item"}}
    assert schema["$defs"] == {"Item": item}  # the caller's schema is not mutated


@pytest.mark.parametrize("text", ["not json at all", '{"answer": 42}', "42"])
def test_unwrap_failure_returns_text_unchanged(server: LoopbackServer, text: str) -> None:
    server.reply(text)
    with make(server) as client:
        assert client.complete(ask(output_schema={"type": "integer"})).text == text


def test_tool_call_reply_is_parsed(server: LoopbackServer) -> None:
    server.reply(
        None,
        tool_calls=[
            tool_call("call_1", "get_weather", {"city": "Paris", "days": 2}),
            tool_call("call_2", "now", ""),  # no-argument tools: some servers send ""
        ],
        finish_reason="tool_calls",
    )
    tools = [
        {
            "name": "get_weather",
            "description": "Weather forecast.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
        {"name": "now"},
    ]
    with make(server) as client:
        reply = client.complete(ask(tools=tools))

    assert reply.text is None
    assert reply.finish_reason == "tool_calls"
    assert reply.tool_calls == (
        ToolCall(id="call_1", name="get_weather", input={"city": "Paris", "days": 2}),
        ToolCall(id="call_2", name="now", input={}),
    )
    assert server.requests[0].body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather forecast.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        },
        {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}},
    ]


def test_tool_conversation_is_translated_to_wire_format(server: LoopbackServer) -> None:
    server.reply("It is sunny.")
    request = Request(
        model="m",
        messages=[
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_1", "name": "get_weather", "input": {"city": "Paris"}}],
            },
            {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "sunny"},
        ],
    )
    with make(server) as client:
        assert client.complete(request).text == "It is sunny."

    messages = server.requests[0].body["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }
    assert messages[2] == {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}


def test_tool_call_with_bad_arguments_is_a_protocol_error(server: LoopbackServer) -> None:
    server.reply(None, tool_calls=[tool_call("c", "search", "{not json")])
    with make(server) as client, pytest.raises(ModelError) as info:
        client.complete(ask())
    assert info.value.code == "model-protocol"
    assert "search" in str(info.value)


# -- retries -------------------------------------------------------------------


def test_429_then_success_retries_honouring_retry_after(server: LoopbackServer) -> None:
    server.script(
        Scripted(status=429, body=error_body("slow down", "rate_limit"), headers={"Retry-After": "0"}),
        Scripted(body=completion("done")),
    )
    sleeps = Sleeps()
    with make(server, sleep=sleeps, backoff=5.0) as client:
        assert client.complete(ask()).text == "done"
    assert len(server.requests) == 2
    assert sleeps == [0.0]  # Retry-After: 0 beat the 5 s backoff


def test_retry_after_is_capped(server: LoopbackServer) -> None:
    server.script(
        Scripted(status=503, headers={"Retry-After": "86400"}),
        Scripted(body=completion("done")),
    )
    sleeps = Sleeps()
    with make(server, sleep=sleeps) as client:
        assert client.complete(ask()).text == "done"
    assert sleeps == [30.0]


def test_500_every_time_gives_up_after_max_retries(server: LoopbackServer) -> None:
    server.default = Scripted(status=500, body=error_body("engine overloaded", "server_error"))
    sleeps = Sleeps()
    with make(server, max_retries=3, backoff=0.5, sleep=sleeps) as client:
        with pytest.raises(ModelError) as info:
            client.complete(ask())

    err = info.value
    assert len(server.requests) == 4
    # exponential backoff, each step jittered between half and all of it
    assert len(sleeps) == 3 and all(low <= got <= 2 * low for low, got in zip([0.25, 0.5, 1.0], sleeps))
    assert err.code == "model-http"
    assert err.status == 500
    assert "gave up on openai at" in str(err) and "after 4 attempts" in str(err)
    assert "500" in str(err)
    assert "engine overloaded" in str(err)


def test_real_sleep_with_zero_backoff(server: LoopbackServer) -> None:
    # The default sleep is time.sleep; backoff=0 keeps it instant.
    server.script(Scripted(status=502, body="bad gateway"), Scripted(body=completion("ok")))
    with OpenAIClient(base_url=server.url, backoff=0) as client:
        assert client.complete(ask()).text == "ok"
    assert len(server.requests) == 2


def test_dropped_connection_is_retried(server: LoopbackServer) -> None:
    server.script(Scripted(drop=True), Scripted(body=completion("ok")))
    with make(server) as client:
        assert client.complete(ask()).text == "ok"
    assert len(server.requests) == 2


def test_timeout_is_unreachable_after_retries(server: LoopbackServer) -> None:
    server.default = Scripted(delay=2.0, body=completion("late"))
    with make(server, timeout=0.05, max_retries=1) as client:
        with pytest.raises(ModelError) as info:
            client.complete(ask())
    assert info.value.code == "model-unreachable"
    assert "timed out" in str(info.value)
    assert len(server.requests) == 2


# -- errors --------------------------------------------------------------------


def test_401_echoing_the_key_never_shows_the_key(server: LoopbackServer) -> None:
    server.script(
        Scripted(
            status=401,
            body=error_body(f"Incorrect API key provided: {KEY}. Header was 'Bearer {KEY}'.", "auth"),
        )
    )
    client = make(server)
    with client, pytest.raises(ModelError) as info:
        client.complete(ask())

    err = info.value
    assert len(server.requests) == 1  # a 4xx is not retried
    assert err.code == "model-http"
    assert err.status == 401
    assert "Incorrect API key provided" in str(err)
    for text in (str(err), repr(err), err.message, repr(client), str(client), repr(vars(client))):
        assert KEY not in text
        assert "SECRET" not in text
    assert repr(client) == f"OpenAIClient(name='openai', base_url='{server.url}')"


def test_a_key_echoed_in_utf16_or_escaped_is_scrubbed_from_the_reply_and_errors(server: LoopbackServer) -> None:
    """A body in UTF-16 (JSON may be), a JSON body escaping ordinary characters (\\u002d for "-"), or a
    percent-encoded echo: the key never reaches the reply or the error's message."""
    from urllib.parse import quote

    client = make(server)
    server.script(Scripted(body=json.dumps(completion("your key is " + KEY)).encode("utf-16"),
                           headers={"Content-Type": "application/json"}))
    reply = client.complete(ask())
    assert KEY not in (reply.text or "") and "***" in (reply.text or "")
    escaped = KEY.replace("-", "\\u002d")
    for status, body in ((422, '{"detail": [{"msg": "bad", "input": "%s"}]}' % escaped),
                         (403, "<html>denied: authorization=" + quote("Bearer " + KEY, safe="") + "</html>")):
        server.script(Scripted(status=status, body=body))
        with pytest.raises(ModelError) as info:
            client.complete(ask())
        assert KEY not in str(info.value) and "SECRET" not in str(info.value), str(info.value)
    client.close()


def test_key_not_in_traceback_locals(server: LoopbackServer) -> None:
    # Rich/structlog tracebacks can print every frame's locals: none may show the key.
    server.script(Scripted(status=400, body=error_body("bad request")))
    client = make(server)
    with client, pytest.raises(ModelError) as info:
        client.complete(ask())
    tb = info.value.__traceback__
    # The first frame is this test's own (its server did receive the key, as a server does);
    # every frame after it is checked, wherever its file lives.
    assert tb.tb_frame.f_code is test_key_not_in_traceback_locals.__code__
    tb = tb.tb_next
    seen = 0
    while tb is not None:
        for name, value in tb.tb_frame.f_locals.items():
            seen += 1
            assert KEY not in repr(value), name
            if hasattr(value, "__dict__"):
                assert KEY not in repr(vars(value)), name
        tb = tb.tb_next
    assert seen


@pytest.mark.parametrize("given", [{"api_key": "sk-proj-ABCDEFGH\u2013ijklmnop0123"},
                                   {"api_key": "sk-test-SECRET-0123456789\n"},
                                   {"headers": {"X-Api-Key": "tenant-\u00e9-SECRET-0123456789"}}])
def test_a_key_no_http_header_can_carry_is_refused_without_showing_it(server: LoopbackServer, given) -> None:
    """A non-ASCII character or a line break: refused at once with a code, never sent (the HTTP
    library's own error quoted the key) and never retried."""
    secret = next(iter(given.get("headers", {}).values()), given.get("api_key"))
    with pytest.raises(FunctAIError) as info:
        make(server, **{"api_key": KEY, **given})
    assert info.value.code == "header-value" and server.requests == []
    for text in (str(info.value), repr(info.value)):
        assert secret.strip() not in text and "SECRET" not in text


@pytest.mark.parametrize("url", ["proxyuser:hunter2-ABCDEFGH@127.0.0.1:1/v1", "http:/u:hunter2-ABCDEFGH@h/v1",
                                 "http//u:hunter2-ABCDEFGH@h/v1", "http:u:hunter2-ABCDEFGH@h"])
def test_a_base_url_that_is_no_url_and_holds_a_password_is_refused_without_it(url) -> None:
    for make_it in (lambda: OpenAIClient(base_url=url), lambda: functai.configure(base_url=url)):
        with pytest.raises(FunctAIError) as info:
            make_it()
        assert info.value.code == "base-url-credentials" and "hunter2" not in str(info.value)


def test_an_error_body_nested_deeper_than_json_is_read_is_an_http_error(server: LoopbackServer) -> None:
    server.script(Scripted(status=400, body="[" * 100_000 + "]" * 100_000))
    with make(server) as client, pytest.raises(ModelError) as info:
        client.complete(ask())
    assert info.value.code == "model-http" and info.value.status == 400


def test_base_url_without_scheme_fails_at_once() -> None:
    sleeps = Sleeps()
    with OpenAIClient(base_url="localhost:8000/v1", sleep=sleeps) as client:
        with pytest.raises(ModelError) as info:
            client.complete(ask())
    assert info.value.code == "model-unreachable"
    assert "invalid base URL" in str(info.value)
    assert sleeps == []


def test_4xx_with_plain_text_body_shows_an_excerpt(server: LoopbackServer) -> None:
    server.script(Scripted(status=404, body=f"no such route {KEY} " + "x" * 5000))
    with make(server) as client, pytest.raises(ModelError) as info:
        client.complete(ask())
    msg = str(info.value)
    assert info.value.status == 404
    assert "no such route" in msg and "***" in msg
    assert KEY not in msg
    assert len(msg) < 600


def test_unreachable_names_the_base_url_not_the_key() -> None:
    url, holder = refused_url()
    try:
        sleeps = Sleeps()
        client = OpenAIClient(base_url=url, api_key=KEY, max_retries=2, sleep=sleeps)
        with client, pytest.raises(ModelError) as info:
            client.complete(ask())
    finally:
        holder.close()
    err = info.value
    assert err.code == "model-unreachable"
    assert url in str(err)
    assert "3 attempts" in str(err)
    assert len(sleeps) == 2
    assert KEY not in str(err)
    assert err.__cause__ is None and err.__context__ is None  # no httpx internals (headers) attached


@pytest.mark.parametrize(
    "body",
    ["<html>oops</html>", {"object": "chat.completion"}, {"choices": []}, {"choices": [{"index": 0}]}],
)
def test_malformed_success_is_a_protocol_error(server: LoopbackServer, body: object) -> None:
    server.script(Scripted(body=body))
    with make(server) as client, pytest.raises(ModelError) as info:
        client.complete(ask())
    assert info.value.code == "model-protocol"
    assert len(server.requests) == 1


def test_credentials_in_a_base_url_are_refused_before_anything_is_sent(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"http://user:hunter2-0123456789@127.0.0.1:{server.port}/v1"
    refusals = []
    with pytest.raises(FunctAIError) as info:
        OpenAIClient(base_url=url)
    refusals.append(info.value)
    with pytest.raises(FunctAIError) as info:
        functai.configure(base_url=url)  # refused when set: it never becomes a setting
    refusals.append(info.value)
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    functai.configure(lm="openai/m")

    @functai.ai
    def capital(country: str) -> str:
        """The capital."""

    with pytest.raises(FunctAIError) as info:
        capital("Peru")
    refusals.append(info.value)
    for error in refusals:
        assert error.code == "base-url-credentials"
        assert "hunter2" not in str(error) and f"'http://127.0.0.1:{server.port}/v1'" in str(error)
        assert "api_key=" in str(error) and "Authorization" in str(error)
    assert server.requests == []


@pytest.mark.parametrize("url", ["http://127.0.0.1:1/v1?key=hunter2-0123456789", "http://127.0.0.1:1/v1#hunter2"])
def test_a_base_url_with_a_query_is_refused_without_showing_it(url: str, monkeypatch) -> None:
    with pytest.raises(FunctAIError) as info:
        functai.configure(base_url=url)
    assert info.value.code == "base-url-query" and "hunter2" not in str(info.value)
    assert "http://127.0.0.1:1/v1" in str(info.value)
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    functai.configure(lm="openai/m", api_key="sk-test")

    @functai.ai
    def capital(country: str) -> str:
        """The capital."""

    with pytest.raises(FunctAIError) as info:
        capital("Peru")
    assert info.value.code == "base-url-query" and "hunter2" not in str(info.value)


@pytest.mark.parametrize("url", ["http://user:hunter2-0123456789@example.test:notaport/v1",
                                 "http://user:abc/hunter2-REST@127.0.0.1:1/v1",
                                 "http://user:a?hunter2#x@127.0.0.1:1/v1"])
def test_base_url_credentials_before_a_port_that_cannot_be_read_are_refused_without_them(url: str) -> None:
    """A password holding "/", "?" or "#" ends the host where a URL reader looks for it: none of it is shown."""
    with pytest.raises(FunctAIError) as info:
        functai.configure(base_url=url)
    assert info.value.code == "base-url-credentials" and "hunter2" not in str(info.value)


def test_basic_and_bearer_credentials_echoed_in_any_form_are_scrubbed(server: LoopbackServer) -> None:
    import base64

    basic = base64.b64encode(b"ann:pw-SECRET-0123456789").decode()
    token = "tok-SECRET-0123456789"
    server.script(
        Scripted(status=401, body=error_body(f"bad Authorization 'Basic {basic}': {basic} is ann:pw-SECRET-0123456789")),
        Scripted(status=401, body=error_body(f"unknown token {token} (header 'Bearer {token}')")),
    )
    with OpenAIClient(base_url=server.url, headers={"Authorization": f"Basic {basic}"}) as client:
        with pytest.raises(ModelError) as info:
            client.complete(ask())
    assert server.requests[0].headers["authorization"] == f"Basic {basic}"
    text = str(info.value)
    assert basic not in text and "pw-SECRET" not in text and "bad Authorization" in text
    with OpenAIClient(base_url=server.url, headers={"X-Auth": f"Bearer {token}"}) as client:
        with pytest.raises(ModelError) as info:
            client.complete(ask())
    assert token not in str(info.value) and "unknown token ***" in str(info.value)


# -- configuration -------------------------------------------------------------


def test_key_and_base_url_from_environment(server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/")
    server.reply("from env")
    with OpenAIClient() as client:
        assert client.base_url == server.url
        assert client.complete(ask()).text == "from env"
    assert server.requests[0].headers["authorization"] == "Bearer env-key"
    assert server.requests[0].path == "/v1/chat/completions"


def test_custom_env_names_and_name(server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "mine")
    monkeypatch.setenv("MY_URL", server.root)
    server.reply("ok")
    with OpenAIClient(api_key_env="MY_KEY", base_url_env="MY_URL", name="ollama") as client:
        client.complete(ask())
        assert repr(client) == f"OpenAIClient(name='ollama', base_url='{server.root}')"
    assert server.requests[0].path == "/chat/completions"
    assert server.requests[0].headers["authorization"] == "Bearer mine"


def test_default_base_url() -> None:
    assert OpenAIClient().base_url == "https://api.openai.com/v1"


def test_no_key_sends_no_authorization_header(server: LoopbackServer) -> None:
    server.reply("local")
    with OpenAIClient(base_url=server.url) as client:
        assert client.complete(ask()).text == "local"
    assert "authorization" not in server.requests[0].headers


def test_one_pooled_client_shared_by_threads_and_reopened_after_close(server: LoopbackServer) -> None:
    server.default = Scripted(body=completion("pong"))
    client = make(server)
    replies: list[str | None] = []

    def call() -> None:
        replies.append(client.complete(ask()).text)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert replies == ["pong"] * 8
    first = client._http
    assert first is not None
    client.close()
    assert client._http is None
    assert client.complete(ask()).text == "pong"  # lazily reopened
    assert client._http is not first
    client.close()


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        OpenAIClient(max_retries=-1)
    with pytest.raises(ValueError):
        OpenAIClient(timeout=0)


def test_retry_after_as_an_http_date_is_honoured(server: LoopbackServer) -> None:
    import email.utils
    import time

    when = email.utils.formatdate(time.time() + 12, usegmt=True)
    server.script(Scripted(status=503, headers={"Retry-After": when}), Scripted(body=completion("done")))
    sleeps = Sleeps()
    with make(server, sleep=sleeps, backoff=0.0) as client:
        assert client.complete(ask()).text == "done"
    assert len(sleeps) == 1 and 9.0 <= sleeps[0] <= 12.0  # the date, a second's rounding and the run


def test_a_stream_event_whose_data_spans_several_lines_is_read_whole(server: LoopbackServer) -> None:
    """SSE joins an event's ``data:`` lines with newlines (the openai SDK reads them so)."""
    head = '{"choices": [{"index": 0, "delta":'
    server.script(Scripted(events=[f'{head}\ndata: {{"content": "Hel"}}, "finish_reason": null}}]}}',
                                   f'{head} {{"content": "lo"}},\ndata:\ndata: "finish_reason": "stop"}}]}}']))
    with make(server) as client:
        pieces = list(client.stream(ask()))
    assert pieces[:-1] == ["Hel", "lo"] and pieces[-1].text == "Hello" and pieces[-1].finish_reason == "stop"


def test_requests_name_functai_as_their_user_agent_unless_yours_does(server: LoopbackServer) -> None:
    server.default = Scripted(body=completion("ok"))
    with make(server) as client:
        client.complete(ask())
    assert server.requests[-1].headers["user-agent"] == f"functai/{functai.__version__}"
    with make(server, headers={"user-agent": "my-app/2"}) as client:
        client.complete(ask())
        mine = client.endpoint
    assert server.requests[-1].headers["user-agent"] == "my-app/2"
    with make(server) as plain, make(server, headers={"User-Agent": f"functai/{functai.__version__}"}) as named:
        assert plain.endpoint != mine and plain.endpoint == make(server).endpoint  # ours is not who asks
        assert named.endpoint != plain.endpoint  # one you set is, as every header you set is
