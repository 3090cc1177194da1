"""A budget on plain calls: what it refuses before sending, what it records, what prices it needs,
and the arguments it refuses."""

from __future__ import annotations

import functai_budget
import pytest
from budget_program import QUESTION, assistant, spend_all
from functai_budget import budget, estimate

import functai
from functai import Reply, ai, tool
from functai.testing import ScriptedLM, tool_call

pytestmark = pytest.mark.usefixtures("functai_isolated")  # functai's pytest plugin

BIG = "x" * 3000  # about a thousand tokens more in a prompt


def budget_changes(record: functai.CallRecord) -> list[dict]:
    """The budget's changes in a call's record, as (change, note)."""
    return [(c["change"], c["note"]) for c in record.changes if c["plugin"] == "budget"]


def only_record(folder) -> functai.CallRecord:
    records = list(functai.read_calls(folder))
    assert len(records) == 1
    return records[0]


@tool(effects="reads")
def read_file(name: str) -> str:
    """Read a file."""
    return BIG


def reads_then_answers(request: functai.Request) -> Reply:
    """A model that reads a long file first, then answers (spending all it may each time)."""
    if not any(m["role"] == "tool" for m in request.messages):
        reply = tool_call("read_file", {"name": "notes.txt"})
        return Reply(tool_calls=reply.tool_calls, finish_reason="tool_calls",
                     usage={"input_tokens": estimate(request), "output_tokens": 20})
    return spend_all(request)


# --- per call: checked before sending, refused past the budget ---------------------------------

def test_a_prompt_past_the_budget_is_refused_and_nothing_is_sent(tmp_path):
    lm = ScriptedLM(reply=spend_all)

    @ai(client=lm, plugins=[budget(tokens=20)], log_calls=str(tmp_path))
    def answer(question: str) -> str:
        """Answer."""

    with pytest.raises(functai.FunctAIError) as refused:
        answer("What is the capital of France?")
    assert refused.value.code == "budget-exceeded"
    assert "this call has used 0 tokens of 20 tokens" in refused.value.message
    assert lm.requests == []
    record = only_record(tmp_path)
    assert record.error["code"] == "budget-exceeded"
    [(change, note)] = budget_changes(record)
    assert change == {"refused": "budget-exceeded"}
    assert "nothing was sent" in note


def test_a_call_that_reaches_its_budget_midway_is_refused_before_its_next_request(tmp_path):
    lm = ScriptedLM(reply=reads_then_answers)

    @ai(client=lm, tools=[read_file], plugins=[budget(tokens=1000)], log_calls=str(tmp_path), max_tokens=40)
    def summarize(name: str) -> str:
        """Summarize the file."""

    with pytest.raises(functai.FunctAIError) as refused:
        summarize("notes.txt")
    assert refused.value.code == "budget-exceeded"
    assert len(lm.requests) == 1  # the second request, with the file in it, was never sent
    record = only_record(tmp_path)
    first, second = budget_changes(record)
    assert first[0] == {"decision": "checked"}
    assert second[0] == {"refused": "budget-exceeded"}
    used = estimate(lm.requests[0]) + 20
    assert f"this call has used {used:,} tokens of 1,000 tokens" in second[1]


def test_a_passing_call_records_its_check_and_the_reply_limit_it_set(tmp_path):
    lm = ScriptedLM(reply=spend_all)

    @ai(client=lm, plugins=[budget(tokens=1000)], log_calls=str(tmp_path))
    def answer(question: str) -> str:
        """Answer."""

    assert answer("What is the capital of France?") == "ok"
    [sent] = lm.requests
    [(change, note)] = budget_changes(only_record(tmp_path))
    assert change == {"decision": "checked", "settings": {"max_tokens": sent.settings["max_tokens"]}}
    assert sent.settings["max_tokens"] == 800 - estimate(sent)  # the reply may use what is left below ask_at
    assert note == "0 tokens + at most 800 tokens of 1,000 tokens (call)"


def test_a_reply_that_would_be_cut_short_below_ask_at_may_use_the_whole_budget():
    lm = ScriptedLM(reply=spend_all)

    @ai(client=lm, plugins=[budget(tokens=300)])
    def answer(question: str) -> str:
        """Answer."""

    answer("What is the capital of France?")
    [sent] = lm.requests
    assert 0.8 * 300 - estimate(sent) < functai_budget.MIN_REPLY
    assert sent.settings["max_tokens"] == 300 - estimate(sent)


def test_a_call_with_no_room_left_for_a_long_reply_gets_at_most_the_shipped_reply_limit():
    lm = ScriptedLM(reply=spend_all)

    @ai(client=lm, plugins=[budget(tokens=1_000_000)])
    def answer(question: str) -> str:
        """Answer."""

    answer("hi")
    assert lm.requests[0].settings["max_tokens"] == functai_budget.MAX_REPLY


def test_a_reply_limit_the_function_sets_is_kept_and_checked(tmp_path):
    lm = ScriptedLM(reply=spend_all)

    @ai(client=lm, plugins=[budget(tokens=1000)], log_calls=str(tmp_path), max_tokens=40)
    def answer(question: str) -> str:
        """Answer."""

    answer("What is the capital of France?")
    [sent] = lm.requests
    assert sent.settings["max_tokens"] == 40
    [(change, note)] = budget_changes(only_record(tmp_path))
    assert change == {"decision": "checked"}  # no settings: the function's own limit stands
    assert f"at most {estimate(sent) + 40} tokens" in note


def test_a_reply_limit_the_function_sets_past_the_budget_is_refused():
    lm = ScriptedLM(reply=spend_all)

    @ai(client=lm, plugins=[budget(tokens=1000)], max_tokens=5000)
    def answer(question: str) -> str:
        """Answer."""

    with pytest.raises(functai.FunctAIError) as refused:
        answer("What is the capital of France?")
    assert refused.value.code == "budget-exceeded"
    assert lm.requests == []


def test_a_reply_limit_set_as_max_completion_tokens_is_checked_too():
    lm = ScriptedLM(reply=lambda request: Reply(text="ok", finish_reason="stop"))

    @ai(client=lm, plugins=[budget(tokens=1000)], max_completion_tokens=5000)
    def answer(question: str) -> str:
        """Answer."""

    with pytest.raises(functai.FunctAIError) as refused:  # the reply may hold 5,000 tokens, whatever max_tokens says
        answer("What is the capital of France?")
    assert refused.value.code == "budget-exceeded"
    assert lm.requests == []


def test_a_reply_limit_set_as_max_completion_tokens_is_kept(tmp_path):
    lm = ScriptedLM(reply=lambda request: Reply(text="ok", finish_reason="stop"))

    @ai(client=lm, plugins=[budget(tokens=1000)], log_calls=str(tmp_path), max_completion_tokens=40)
    def answer(question: str) -> str:
        """Answer."""

    answer("What is the capital of France?")
    [sent] = lm.requests
    assert dict(sent.settings) == {"max_completion_tokens": 40}
    [(change, note)] = budget_changes(only_record(tmp_path))
    assert change == {"decision": "checked"}
    assert f"at most {estimate(sent) + 40} tokens" in note


def test_each_call_has_a_budget_of_its_own():
    lm = ScriptedLM(reply=spend_all)

    @ai(client=lm, plugins=[budget(tokens=200)], max_tokens=40)
    def answer(question: str) -> str:
        """Answer."""

    for _ in range(5):  # each spends over half the budget: together they would be far past it
        assert answer("What is the capital of France?") == "ok"
    assert len(lm.requests) == 5


# --- prices -----------------------------------------------------------------------------------

def test_a_dollar_budget_for_a_model_with_no_price_refuses_at_the_first_call():
    lm = ScriptedLM(reply=spend_all)

    @ai(client=lm, plugins=[budget(dollars=5)])
    def answer(question: str) -> str:
        """Answer."""

    with pytest.raises(functai.FunctAIError) as refused:
        answer("hi")
    assert refused.value.code == "budget-price-unknown"
    assert "'scripted'" in refused.value.message and "prices=" in refused.value.message
    assert lm.requests == []


def test_a_price_given_counts_the_model_in_dollars(tmp_path):
    lm = ScriptedLM(reply=lambda request: Reply(text="ok", finish_reason="stop",
                                                usage={"input_tokens": 10_000, "output_tokens": 1_000}))
    plugin = budget(dollars=1, per="conversation", prices={"scripted": (2.0, 8.0, 0.5)})

    @ai(client=lm)
    def answer(question: str) -> str:
        """Answer."""

    chat = answer.conversation("priced", store=functai.MemoryStore(), plugins=[plugin])
    chat("hi")
    [spent] = chat.entries("budget", "spent")
    assert spent["data"]["dollars"] == pytest.approx((10_000 * 2.0 + 1_000 * 8.0) / 1e6)


@pytest.mark.usefixtures("without_genai_prices")  # the shipped table's rules
def test_a_dated_model_name_with_a_provider_has_its_models_price():
    lm = ScriptedLM(reply=lambda request: Reply(text="ok", finish_reason="stop",
                                                usage={"input_tokens": 1_000_000, "output_tokens": 100_000,
                                                       "cached_tokens": 200_000}))

    @ai(client=lm, lm="openai:gpt-4o-mini-2024-07-18")
    def answer(question: str) -> str:
        """Answer."""

    chat = answer.conversation("dated", store=functai.MemoryStore(), plugins=[budget(dollars=5, per="conversation")])
    chat("hi")
    assert lm.requests[0].model == "openai:gpt-4o-mini-2024-07-18"
    mini = functai_budget.PRICES["gpt-4o-mini"]
    [spent] = chat.entries("budget", "spent")
    assert spent["data"]["dollars"] == pytest.approx((800_000 * mini.input + 200_000 * mini.cached
                                                      + 100_000 * mini.output) / 1e6)


def priced_model(model: str) -> tuple[ScriptedLM, functai.AIFunction]:
    lm = ScriptedLM(reply=spend_all)
    return lm, ai(client=lm, lm=model, plugins=[budget(dollars=5)])(assistant.fn)


@pytest.mark.parametrize("model", ["openai:gpt-4o-mini-2024-07-18", "gpt-4.1-2025-04-14",
                                   "anthropic/claude-sonnet-4-20250514", "claude-3-5-haiku-latest"])
@pytest.mark.usefixtures("without_genai_prices")
def test_a_dated_version_of_a_model_has_its_models_price(model):
    lm, answer = priced_model(model)
    assert answer(QUESTION) == "ok"
    assert lm.requests[0].model == model


@pytest.mark.parametrize("model", ["o3-pro", "openai:gpt-5-pro", "gpt-4o-realtime-preview", "o4-mini-deep-research"])
@pytest.mark.usefixtures("without_genai_prices")
def test_another_model_whose_name_starts_with_a_priced_ones_has_no_price(model):
    """o3-pro costs ten times what o3 does: counted at o3's price, a budget would let ten times through."""
    lm, answer = priced_model(model)
    with pytest.raises(functai.FunctAIError) as refused:
        answer(QUESTION)
    assert refused.value.code == "budget-price-unknown" and lm.requests == []


def test_a_token_budget_needs_no_price():
    lm = ScriptedLM(reply=spend_all)

    @ai(client=lm, plugins=[budget(tokens=1000)])
    def answer(question: str) -> str:
        """Answer."""

    assert answer("hi") == "ok"


def test_the_builtin_factory_is_this_distributions():
    plugin = functai.budget(tokens=10)
    assert plugin.name == "budget" and repr(plugin).startswith('Plugin("budget", 0.1.0')


# --- arguments ---------------------------------------------------------------------------------

@pytest.mark.parametrize("arguments, names", [
    ({"tokens": 0}, "tokens"),
    ({"tokens": -5}, "tokens"),
    ({"tokens": float("nan")}, "tokens"),
    ({"tokens": True}, "tokens"),
    ({"dollars": -1}, "dollars"),
    ({"dollars": "5"}, "dollars"),
    ({"tokens": 100, "per": "week"}, "per"),
    ({"tokens": 100, "ask_at": 0}, "ask_at"),
    ({"tokens": 100, "ask_at": 1.5}, "ask_at"),
    ({"dollars": 5, "prices": {"m": "cheap"}}, "'m'"),
    ({"dollars": 5, "prices": {"m": (1.0, -2.0)}}, "'m'"),
    ({"dollars": 5, "prices": {"m": {"in": 1.0}}}, "'m'"),
    ({"dollars": 5, "prices": [("m", 1.0, 2.0)]}, "prices"),
    ({"tokens": 100, "decide": "yes"}, "decide"),
    ({}, "tokens=..., dollars=..."),
])
def test_a_bad_argument_is_refused_naming_what_to_fix(arguments, names):
    with pytest.raises(TypeError) as refused:
        budget(**arguments)
    assert names in str(refused.value)


# --- per call: the calls nested in it share its budget -------------------------------------------

def test_a_call_and_the_ai_functions_it_calls_as_tools_share_one_budget():
    spent: list[int] = []

    def paid(request: functai.Request) -> Reply:
        used = {"input_tokens": 100, "output_tokens": 50}
        spent.append(150)
        if request.tools and not any(m["role"] == "tool" for m in request.messages):
            return Reply(tool_calls=tool_call("helper", {"question": "x"}).tool_calls, finish_reason="tool_calls",
                         usage=used)
        return Reply(text="done", finish_reason="stop", usage=used)

    @ai(max_tokens=50)
    def helper(question: str) -> str:
        """Help."""

    @ai(tools=[helper], max_tokens=50)
    def boss(question: str) -> str:
        """Answer, asking the helper first."""

    with functai.settings(client=ScriptedLM(reply=paid), plugins=[budget(tokens=400, ask_at=1.0)]):
        with pytest.raises(functai.FunctAIError) as refused:
            boss("q")
    # the boss's first request (150) and the helper's (150) leave 100: the boss's second could cost more
    assert refused.value.code == "budget-exceeded" and "this call has used 300 tokens" in refused.value.message
    assert sum(spent) == 300


def test_a_grant_made_before_a_turn_waits_is_kept_once(tmp_path):
    """decide grants more; another plugin then makes the turn wait before the request is sent.
    Resumed, the request is checked again, within the extension already kept: kept once."""
    grants: list[int] = []

    def decide(question):
        grants.append(1)
        return True

    def ask_once(event):
        if not event.recorded:
            event.ask("may this request be sent?")

    lm = ScriptedLM(reply=spend_all)
    asker = functai.Plugin("asker", request=ask_once, last=True, after=["budget"])  # asks after the budget

    @ai(client=lm, max_tokens=50, plugins=[budget(tokens=70, per="conversation", decide=decide), asker])
    def answer(question: str) -> str:
        """Answer."""

    chat = answer.conversation("c", store=str(tmp_path / "s"))
    with pytest.raises(functai.Waiting) as waiting:
        chat("q")  # past 80% of 70 tokens: decide grants 70 more; the asker waits
    assert len(grants) == 1 and lm.requests == []
    waiting.value.turn.approve()
    waiting.value.turn.resume()
    assert len(grants) == 1  # the grant kept before the wait holds on the resumed turn
    extended = chat.entries("budget", "extended")
    assert [e["data"]["extend"] for e in extended] == [{"tokens": 70.0}]


def test_a_plugin_that_raises_the_reply_limit_is_checked_by_the_budget_after_it():
    lm = ScriptedLM(reply=spend_all)
    longer = functai.Plugin("longer", request=lambda event: functai.Change(settings={"max_tokens": 8000}))

    @ai(client=lm, plugins=[budget(tokens=1000), longer])  # listed first, the budget still runs last
    def answer(question: str) -> str:
        """Answer."""

    with pytest.raises(functai.FunctAIError) as refused:
        answer("q")
    assert refused.value.code == "budget-exceeded" and lm.requests == []


def test_an_attempt_that_began_to_stream_and_failed_is_counted_before_the_retry():
    class Flaky(ScriptedLM):
        """Its first stream sends some text, then the connection drops."""

        def __init__(self) -> None:
            super().__init__(reply=spend_all)
            self.streams = 0

        def stream(self, request):
            self.streams += 1
            if self.streams == 1:
                yield "partial "
                raise functai.ModelError("the connection dropped", code="model-unreachable")
            yield from super().stream(request)

    @ai(max_tokens=50)
    def answer(question: str) -> str:
        """Answer."""

    probe = ScriptedLM(reply=spend_all)
    with functai.settings(client=probe):
        answer("q")
    most = estimate(probe.requests[0]) + 50  # what one request may cost, and what spend_all spends
    lm = Flaky()
    retry = functai.Plugin("retry", model_error=lambda failure: functai.Change(retry=0) if failure.attempt == 1
                           else None)
    guard = budget(tokens=3 * most - 1, per="process", ask_at=1.0)
    with functai.settings(client=lm, plugins=[guard, retry]):
        with answer.stream("q") as stream:
            list(stream)
        assert lm.streams == 2
        # the attempt that failed counts as its most, the retry as what it spent: 2 × most, so a third
        # request of the same size would pass the budget
        with pytest.raises(functai.FunctAIError) as refused:
            answer("q")
    assert refused.value.code == "budget-exceeded"
