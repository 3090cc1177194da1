"""Replies that are not an answer, reasoning, usage and secrets — through an AI function, over loopback."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Iterator

import pytest
from loopback import LoopbackServer, Scripted, completion, error_body, tool_call

import functai
from functai import ai
from functai.errors import FunctAIError

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


def test_the_key_is_in_no_frame_of_a_failing_call(answers_400: None) -> None:
    with pytest.raises(FunctAIError) as info:
        capital("Peru")
    tb = info.value.__traceback__
    frames = 0
    while tb is not None:  # every frame, functai's or not
        frames += 1
        for name, value in tb.tb_frame.f_locals.items():
            for text in _reprs(value):
                assert KEY not in text, (tb.tb_frame.f_code.co_name, name)
        tb = tb.tb_next
    assert frames >= 4  # the test, the function, the call, the client
    assert KEY not in str(info.value) and KEY not in json.dumps(info.value.record.to_dict(), default=str)


def test_resolved_settings_hold_no_key(server: LoopbackServer) -> None:
    from functai.layers import current_values, resolve

    assert KEY not in repr(current_values()) and "<api key>" in repr(current_values())
    assert KEY not in repr(dict(resolve(capital.own).values))


def test_a_key_echoed_in_a_reply_is_scrubbed_before_it_is_returned_or_recorded(server: LoopbackServer, tmp_path) -> None:
    server.reply(f"Your key is {KEY}, and the capital is Lima.")
    with functai.settings(log_calls=str(tmp_path)):
        value, record = capital.run("Peru")
    assert value == "Your key is ***, and the capital is Lima."
    assert KEY not in (tmp_path / "calls.jsonl").read_text()


def test_a_short_key_is_not_scrubbed_from_text(server: LoopbackServer) -> None:
    functai.configure(api_key="k")
    server.reply("unknown")
    assert capital("Peru") == "unknown"  # not "un***nown"
    server.script(Scripted(status=404, body=error_body("unknown model")))
    error = failing(capital, "Peru")
    assert "unknown model" in error.message


if sys.version_info < (3, 10):  # pragma: no cover - the project needs 3.10
    pytest.skip("needs Python 3.10", allow_module_level=True)
