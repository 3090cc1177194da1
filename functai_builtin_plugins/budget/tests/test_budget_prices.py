"""Where a dollar budget finds a model's price: ``prices=``, then genai-prices (installed here, as
the dev extra installs it), then the shipped table; a model none knows is still refused."""

from __future__ import annotations

import sys
from decimal import Decimal

import pytest

if sys.version_info < (3, 11):
    pytest.skip("genai-prices needs Python 3.11 or later", allow_module_level=True)

import genai_prices  # noqa: E402
from budget_program import QUESTION, assistant, spend_all  # noqa: E402
from functai_budget import budget, prices  # noqa: E402

import functai  # noqa: E402
from functai import Reply, ai  # noqa: E402
from functai.testing import ScriptedLM  # noqa: E402

pytestmark = pytest.mark.usefixtures("functai_isolated")


def spent_dollars(model: str, usage: dict[str, int], **given) -> float:
    """What a conversation budget counted for one reply of ``model`` that used ``usage``."""
    lm = ScriptedLM(reply=lambda request: Reply(text="ok", finish_reason="stop", usage=usage))

    @ai(client=lm, lm=model)
    def answer(question: str) -> str:
        """Answer."""

    chat = answer.conversation("priced", store=functai.MemoryStore(),
                               plugins=[budget(dollars=100, per="conversation", **given)])
    chat("hi")
    [spent] = chat.entries("budget", "spent")
    return spent["data"]["dollars"]


def genai_price(model: str, **usage: int) -> float:
    return float(genai_prices.calc_price(genai_prices.Usage(**usage), model).total_price)


def test_a_model_only_genai_prices_knows_is_counted_at_its_price():
    """o3-pro is not in the shipped table (whose rules refuse it: see test_budget_calls)."""
    assert spent_dollars("o3-pro", {"input_tokens": 12_000, "output_tokens": 3_000}) == pytest.approx(
        genai_price("o3-pro", input_tokens=12_000, output_tokens=3_000))


def test_a_tiered_price_counts_a_prompt_at_its_sizes_tier_and_plans_at_the_highest():
    small = {"input_tokens": 100_000, "output_tokens": 1_000}
    large = {"input_tokens": 300_000, "output_tokens": 1_000}
    assert spent_dollars("gemini-2.5-pro", small) == pytest.approx(genai_price("gemini-2.5-pro", **small))
    assert spent_dollars("gemini-2.5-pro", large) == pytest.approx(genai_price("gemini-2.5-pro", **large))
    per_token_small = genai_price("gemini-2.5-pro", input_tokens=100_000) / 100_000
    per_token_large = genai_price("gemini-2.5-pro", input_tokens=300_000) / 300_000
    assert per_token_large > per_token_small  # the provider tiers this model: each is counted at its own
    price = prices.find({}, "gemini-2.5-pro")
    assert price.input == pytest.approx(per_token_large * 1e6)  # a plan errs high


def test_cached_input_is_counted_at_the_cached_price():
    usage = {"input_tokens": 10_000, "output_tokens": 500, "cached_tokens": 8_000}
    expected = genai_price("gpt-4.1", input_tokens=10_000, output_tokens=500, cache_read_tokens=8_000)
    assert spent_dollars("gpt-4.1", usage) == pytest.approx(expected)
    assert expected < genai_price("gpt-4.1", input_tokens=10_000, output_tokens=500)


def test_a_price_given_comes_before_genai_prices():
    assert spent_dollars("o3-pro", {"input_tokens": 1_000_000, "output_tokens": 0},
                         prices={"o3-pro": (1.0, 2.0)}) == pytest.approx(1.0)


def test_a_provider_genai_prices_does_not_know_is_looked_past():
    assert prices.find({}, "my-proxy:gpt-4o-mini").input == pytest.approx(
        float(genai_prices.calc_price(genai_prices.Usage(input_tokens=10**6), "gpt-4o-mini").total_price))


def test_a_model_no_one_prices_is_still_refused():
    lm = ScriptedLM(reply=spend_all)
    answer = ai(client=lm, lm="a-model-nobody-prices", plugins=[budget(dollars=5)])(assistant.fn)
    with pytest.raises(functai.FunctAIError) as refused:
        answer(QUESTION)
    assert refused.value.code == "budget-price-unknown" and lm.requests == []


@pytest.mark.usefixtures("without_genai_prices")
def test_without_genai_prices_the_shipped_table_prices_what_it_knows():
    assert prices.find({}, "gpt-4o-mini") == prices.PRICES["gpt-4o-mini"]
    assert prices.find({}, "o3-pro") is None


def test_genai_prices_counts_in_decimals_the_budget_keeps_as_floats():
    price = prices.find({}, "gpt-4o-mini")
    assert isinstance(price.dollars(1_000, 1_000), float)
    assert Decimal(str(price.dollars(1_000_000, 0))) == genai_prices.calc_price(
        genai_prices.Usage(input_tokens=1_000_000), "gpt-4o-mini").total_price
