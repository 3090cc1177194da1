"""Replies that are not an answer, reasoning, usage and secrets — through an AI function, over loopback."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Iterator

import pytest
from loopback import LoopbackServer, Scripted, chunks, completion, error_body, tool_call

import functai
from functai import ai
from functai._errors import FunctAIError
from functai._layers import current_values

KEY = "sk-test-SECRET-0123456789"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)
    with LoopbackServer() as srv:
        functai.configure(lm="openai/m", base_url=srv.url, api_key=KEY, http_retries=0)
        yield srv


@dataclasses.dataclass
class City:
    name: str
    people: int


@ai
def capital(country: str) -> str:
    """The capital city of the country."""


@ai
def population(city: str) -> int:
    """How many people live there."""


@ai
def city(country: str) -> City:
    """The capital, with its population."""


def failing(fn, *args) -> FunctAIError:
    with pytest.raises(FunctAIError) as info:
        fn(*args)
    return info.value


# -- 1. replies that are not an answer --------------------------------------------------


@pytest.mark.parametrize("fn", [capital, population], ids=["str", "typed"])
def test_a_refusal_is_its_own_error_and_not_asked_again(server: LoopbackServer, fn) -> None:
    server.default = Scripted(body=completion(None, refusal="I can't help with that."))
    error = failing(fn, "Peru")
    assert error.code == "model-refused"
    assert "I can't help with that." in error.message
    assert error.record.error == {"code": "model-refused", "message": error.message}
    assert len(server.requests) == 1  # no re-ask, though retries=1


def test_a_content_filter_is_its_own_error_and_not_asked_again(server: LoopbackServer) -> None:
    server.default = Scripted(body=completion("", finish_reason="content_filter"))
    error = failing(population, "Lima")
    assert error.code == "model-filtered" and "content_filter" in error.message
    assert error.record.finish_reason == "content_filter"
    assert len(server.requests) == 1


def test_a_typed_value_cut_at_the_token_limit_is_truncated_not_asked_again(server: LoopbackServer) -> None:
    server.default = Scripted(body=completion('{"name": "Li', finish_reason="length"))
    error = failing(city, "Peru")
    assert error.code == "model-truncated" and "max_completion_tokens" in error.message
    assert len(server.requests) == 1


def test_a_str_cut_at_the_token_limit_is_returned_and_the_record_says_so(server: LoopbackServer) -> None:
    server.reply("Lima is the capital and lar", finish_reason="length")
    value, record = capital.run("Peru")
    assert value == "Lima is the capital and lar"
    assert record.finish_reason == "length"


def test_no_content_and_no_tool_calls_is_empty_not_the_empty_string(server: LoopbackServer) -> None:
    server.reply(None)
    error = failing(capital, "Peru")
    assert error.code == "model-empty"
    assert len(server.requests) == 1


def test_a_reasoning_only_reply_is_empty_and_the_reasoning_is_recorded(server: LoopbackServer) -> None:
    server.reply(None, finish_reason="length", reasoning_content="Peru... the capital is Lima, I think")
    error = failing(population, "Lima")
    assert error.code == "model-empty" and "reasoned" in error.message
    assert error.record.reasoning == "Peru... the capital is Lima, I think"
    assert len(server.requests) == 1


# -- 2. reasoning models and double-encoded arguments ---------------------------------


def test_a_think_block_before_json_is_kept_out_of_the_value_and_recorded(server: LoopbackServer) -> None:
    server.reply('<think>\nLima has about 10 million people.\n</think>\n\n{"value": 10000000}')
    value, record = population.run("Lima")
    assert value == 10_000_000
    assert record.reasoning == "Lima has about 10 million people."


def test_a_thinking_block_is_kept_out_of_a_str_value(server: LoopbackServer) -> None:
    server.reply("<thinking>It is Lima.</thinking>Lima")
    value, record = capital.run("Peru")
    assert value == "Lima" and record.reasoning == "It is Lima."


def test_a_reply_that_only_thinks_is_empty(server: LoopbackServer) -> None:
    server.reply("<think>Hmm, Peru. The capital", finish_reason="length")  # cut while thinking
    error = failing(capital, "Peru")
    assert error.code == "model-empty"
    assert error.record.reasoning == "Hmm, Peru. The capital"


def test_double_encoded_tool_arguments_are_read(server: LoopbackServer) -> None:
    seen = []

    @functai.tool(effects="reads")
    def lookup(city: str, year: int) -> str:
        """Look a city's population up."""
        seen.append((city, year))
        return "10 million"

    @ai(tools=[lookup])
    def people(city: str) -> str:
        """How many people live in the city."""

    twice = json.dumps(json.dumps({"city": "Lima", "year": 2024}))  # a JSON string holding JSON
    server.script(
        Scripted(body=completion(None, tool_calls=[tool_call("c1", "lookup", twice)], finish_reason="tool_calls")),
        Scripted(body=completion("About 10 million.")),
    )
    assert people("Lima") == "About 10 million."
    assert seen == [("Lima", 2024)]


def test_usage_is_summed_over_the_requests_with_cached_and_reasoning_tokens(server: LoopbackServer) -> None:
    @functai.tool(effects="reads")
    def lookup(city: str) -> str:
        """Look a city up."""
        return "big"

    @ai(tools=[lookup])
    def describe(city: str) -> str:
        """Describe the city."""

    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "total_tokens": 120,
        "prompt_tokens_details": {"cached_tokens": 64},
        "completion_tokens_details": {"reasoning_tokens": 12},
    }
    server.script(
        Scripted(body=completion(None, tool_calls=[tool_call("c1", "lookup", {"city": "Lima"})],
                                 finish_reason="tool_calls", usage=usage)),
        Scripted(body=completion("Big.", usage={**usage, "prompt_tokens": 130, "total_tokens": 150})),
    )
    value, record = describe.run("Lima")
    assert value == "Big."
    assert record.usage == {
        "input_tokens": 230, "output_tokens": 40, "total_tokens": 270, "cached_tokens": 128, "reasoning_tokens": 24,
    }
    assert record.finish_reason == "stop"


def test_reasoning_is_kept_out_of_a_log_without_content(server: LoopbackServer, tmp_path) -> None:
    server.reply("<think>secret thoughts</think>Lima")
    with functai.settings(log_calls=str(tmp_path), log_content=False):
        capital("Peru")
    [record] = functai.read_calls(tmp_path)
    assert record.reasoning == {"chars": len("secret thoughts")}
    assert record.finish_reason == "stop"
    assert "secret thoughts" not in (tmp_path / "calls.jsonl").read_text()


# -- secrets out of reach (issue 11, point 8) ----------------------------------------------


def _reprs(value: object) -> list[str]:
    texts = [repr(value)]
    try:
        texts.append(repr(vars(value)))
    except TypeError:
        pass
    return texts


@pytest.fixture
def answers_400(server: LoopbackServer) -> None:
    """The server (which did receive the key, as a server does) stays out of the test's frame."""
    server.default = Scripted(status=400, body=error_body("bad request"))


#: Secret header values: by name (a key, a token, a cookie, a password) and an Authorization of its own.
HEADERS = {"X-Api-Key": "hdr-KEY-0123456789", "X-Session-Token": "hdr-TOKEN-0123456789",
           "Cookie": "sid=hdr-COOKIE-0123456789", "X-Db-Password": "hdr-PASSWORD-0123456789"}
SECRETS = (KEY, "hdr-KEY", "hdr-TOKEN", "hdr-COOKIE", "hdr-PASSWORD", "pg-PASSWORD")


def _in_no_frame(error: BaseException) -> int:
    """Walk every frame of ``error``'s traceback after the test's own (which holds what it set, as the
    program does), functai's or not: no local shows a secret. The frame count."""
    tb = error.__traceback__.tb_next
    frames = 1
    while tb is not None:
        frames += 1
        for name, value in tb.tb_frame.f_locals.items():
            for text in _reprs(value):
                for secret in SECRETS:
                    assert secret not in text, (tb.tb_frame.f_code.co_name, name, secret)
        tb = tb.tb_next
    return frames


def test_the_key_is_in_no_frame_of_a_failing_call(answers_400: None) -> None:
    functai.configure(headers={**HEADERS, "X-Trace": "plain-0123456789"})
    with pytest.raises(FunctAIError) as info:
        capital("Peru")
    assert _in_no_frame(info.value) >= 4  # the test, the function, the call, the client
    data = json.dumps(info.value.record.to_dict(), default=str)
    for secret in SECRETS:
        assert secret not in str(info.value) and secret not in data


def _with_password(url: str) -> str:
    from urllib.parse import urlsplit

    assert urlsplit(url).password is None, "the test server's URL has a password of its own"
    return url.replace("@", ":pg-PASSWORD-0123456789@", 1)  # the test server trusts: any password works


def test_a_postgresql_password_is_in_no_frame_of_a_failing_call(answers_400: None, postgres_url: str) -> None:
    from functai._stores.opening import forget

    url = _with_password(postgres_url)
    functai.configure(log_calls=url)
    chat = capital.conversation("c1", store=url)
    try:
        with pytest.raises(FunctAIError) as info:
            chat("Peru")
        assert info.value.code == "model-http"
        assert _in_no_frame(info.value) >= 4
        [logged] = functai.read_calls(url)  # the call was logged, in the database the URL names
        assert logged.error["code"] == "model-http" and logged.conversation["store"] == postgres_url
        assert "pg-PASSWORD" not in repr(current_values()) and "<url postgresql://" in repr(current_values())
        functai.rate(logged, good=False)  # ratings go beside the log the setting names
        assert [r.rating["good"] for r in functai.read_calls(url, rated=True)] == [False]
    finally:
        forget(url)


def test_a_call_log_url_from_the_environment_is_hidden_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from functai._layers import from_environment
    from functai._models.keys import reveal

    url = "postgresql://ann:pg-PASSWORD-0123456789@db.example/calls"
    monkeypatch.setenv("FUNCTAI_LOG_CALLS", url)
    hidden = from_environment().values["log_calls"]
    assert repr(hidden) == "<url postgresql://ann@db.example/calls>" and reveal(hidden) == url
    monkeypatch.setenv("FUNCTAI_LOG_CALLS", "calls/")
    assert from_environment().values["log_calls"] == "calls/"  # no password: kept as it is


def test_resolved_settings_hold_no_key(server: LoopbackServer) -> None:
    from functai._layers import resolve

    functai.configure(headers={**HEADERS, "X-Trace": "plain-0123456789"})
    shown = repr(current_values())
    assert "<api key>" in shown and "<secret>" in shown and "plain-0123456789" in shown
    for secret in SECRETS:
        assert secret not in shown and secret not in repr(dict(resolve(capital.own).values))
    server.reply("Lima")
    assert capital("Peru") == "Lima"  # and the server gets them all, as set
    sent = server.requests[-1].headers
    assert sent["authorization"] == f"Bearer {KEY}" and sent["x-api-key"] == HEADERS["X-Api-Key"]
    assert sent["cookie"] == HEADERS["Cookie"] and sent["x-trace"] == "plain-0123456789"


def test_a_key_echoed_in_a_reply_is_scrubbed_before_it_is_returned_or_recorded(server: LoopbackServer, tmp_path) -> None:
    server.reply(f"Your key is {KEY}, and the capital is Lima.")
    with functai.settings(log_calls=str(tmp_path)):
        value, record = capital.run("Peru")
    assert value == "Your key is ***, and the capital is Lima."
    assert KEY not in (tmp_path / "calls.jsonl").read_text()


def test_a_key_a_server_escapes_in_its_json_is_scrubbed_too(server: LoopbackServer, tmp_path) -> None:
    """A JSON writer may escape any character (PHP writes ``\\/``, Gson ``\\u003d``): the bytes then
    do not hold the key, the parsed text does."""
    escaped = "".join(f"\\u{ord(c):04x}" if c in "-0" else c for c in KEY)
    body = json.dumps(completion("Your key is KEYHERE.")).replace("KEYHERE", escaped)
    server.script(Scripted(body=body, headers={"content-type": "application/json"}))
    with functai.settings(log_calls=str(tmp_path)):
        value, record = capital.run("Peru")
    assert value == "Your key is ***." and KEY not in json.dumps(record.to_dict())
    assert KEY not in (tmp_path / "calls.jsonl").read_text()


@pytest.mark.parametrize("cut", [3, 10, len(KEY) - 1])
def test_a_key_split_across_streamed_text_events_is_never_shown(server: LoopbackServer, cut: int) -> None:
    server.script(Scripted(events=chunks("Your key is " + KEY[:cut], KEY[cut:] + ".", " Lima")))
    events = list(capital.stream("Peru"))
    shown = "".join(event.text for event in events if event.kind == "text")
    assert KEY not in shown and shown == "Your key is ***. Lima"
    assert events[-1].value == "Your key is ***. Lima"


def test_text_that_only_begins_like_the_key_is_shown_whole_at_the_end(server: LoopbackServer) -> None:
    server.script(Scripted(events=chunks("Lima, " + KEY[:8])))
    events = list(capital.stream("Peru"))
    assert "".join(event.text for event in events if event.kind == "text") == "Lima, " + KEY[:8]


def test_a_servers_error_mid_stream_is_scrubbed_and_cut_short(server: LoopbackServer) -> None:
    import traceback

    said = f"bad request from Bearer {KEY}: " + "x" * 100_000
    server.script(Scripted(events=[chunks("Li")[1], {"error": {"message": said}}]))
    with pytest.raises(FunctAIError) as info:
        list(capital.stream("Peru"))
    assert KEY not in info.value.message and len(info.value.message) < 1000
    summary = traceback.TracebackException.from_exception(info.value, capture_locals=True)
    frames = [frame for frame in summary.stack if frame.name != "test_a_servers_error_mid_stream_is_scrubbed_and_cut_short"]
    assert frames and not [frame.name for frame in frames if KEY in repr(frame.locals)]  # in no frame of functai's


@pytest.mark.parametrize("body", [
    "[" * 200_000,
    {"choices": [{"message": {"role": "assistant", "content": "x", "tool_calls": 5}, "finish_reason": "stop"}]},
    {"choices": [{"message": {"role": "assistant", "content": [{"type": "text", "text": 5}]},
                  "finish_reason": "stop"}]},
])
def test_an_answer_of_no_known_shape_is_model_protocol(server: LoopbackServer, body) -> None:
    server.script(Scripted(body=body if isinstance(body, dict) else body.encode(),
                           headers={"content-type": "application/json"}))
    assert failing(capital, "Peru").code == "model-protocol"


@pytest.mark.parametrize("event", [
    "[" * 200_000,
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": [1], "function": {"name": "f"}}]}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": 7}}]},
])
def test_a_stream_event_of_no_known_shape_is_model_protocol(server: LoopbackServer, event) -> None:
    server.script(Scripted(events=[event, *chunks("x")[1:]]))
    with pytest.raises(FunctAIError) as info:
        list(capital.stream("Peru"))
    assert info.value.code == "model-protocol"


def test_a_body_that_does_not_decode_is_model_protocol(server: LoopbackServer) -> None:
    server.script(Scripted(body=json.dumps(completion("Lima")).encode(),
                           headers={"content-type": "application/json", "content-encoding": "gzip"}))
    assert failing(capital, "Peru").code == "model-protocol"


def test_a_short_key_is_not_scrubbed_from_text(server: LoopbackServer) -> None:
    functai.configure(api_key="k")
    server.reply("unknown")
    assert capital("Peru") == "unknown"  # not "un***nown"
    server.script(Scripted(status=404, body=error_body("unknown model")))
    error = failing(capital, "Peru")
    assert "unknown model" in error.message


if sys.version_info < (3, 10):  # pragma: no cover - the project needs 3.10
    pytest.skip("needs Python 3.10", allow_module_level=True)
