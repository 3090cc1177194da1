"""What models cost, in dollars per million tokens.

A model's price is looked for in three places, in order: the ``prices=`` given to
`functai_budget.budget`; genai-prices (``pip install genai-prices``), where installed, which
knows thousands of models and prices tiers by the prompt's size; and the table below, as the
providers published it on `DATED`. In ``prices=`` and the table a model is found by its name
without the provider, and without a date or ``latest`` after it (``openai:gpt-4o-mini`` and
``gpt-4o-mini-2024-07-18`` are ``gpt-4o-mini``). Only a date: a longer name is another model
(``o3-pro`` costs ten times what ``o3`` does). A model none of them knows has no price, and is
never counted as free.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

__all__ = ["DATED", "PRICES", "Price", "find", "table"]

#: A prompt larger than any provider's tier threshold: per-million prices read at it are the highest tier's.
_PAST_EVERY_TIER = 10**8

#: The day the prices below were read from the providers' price pages.
DATED = "2025-08-15"


class Price:
    """Dollars per million tokens: ``input``, ``output``, and ``cached`` (input read from the
    provider's prompt cache; the input price when the provider has none)."""

    __slots__ = ("input", "output", "cached")

    def __init__(self, input: float, output: float, cached: float | None = None) -> None:  # noqa: A002
        self.input = input
        self.output = output
        self.cached = input if cached is None else cached

    def dollars(self, input_tokens: float, output_tokens: float, cached_tokens: float = 0) -> float:
        """What tokens cost; ``cached_tokens`` are part of ``input_tokens``, at the cached price."""
        cached = min(cached_tokens, input_tokens)
        return ((input_tokens - cached) * self.input + cached * self.cached + output_tokens * self.output) / 1e6

    def __repr__(self) -> str:
        return f"Price(input={self.input}, output={self.output}, cached={self.cached})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Price) and (self.input, self.output, self.cached) == (
            other.input, other.output, other.cached)

    __hash__ = None  # type: ignore[assignment]


#: Dollars per million tokens (input, output, cached input).
PRICES: dict[str, Price] = {
    "gpt-5": Price(1.25, 10.00, 0.125),
    "gpt-5-mini": Price(0.25, 2.00, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "gpt-4o": Price(2.50, 10.00, 1.25),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "o3": Price(2.00, 8.00, 0.50),
    "o3-mini": Price(1.10, 4.40, 0.55),
    "o4-mini": Price(1.10, 4.40, 0.275),
    "claude-opus-4": Price(15.00, 75.00, 1.50),
    "claude-sonnet-4": Price(3.00, 15.00, 0.30),
    "claude-3-7-sonnet": Price(3.00, 15.00, 0.30),
    "claude-3-5-haiku": Price(0.80, 4.00, 0.08),
    "gemini-2.5-pro": Price(1.25, 10.00, 0.31),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.075),
    "gemini-2.0-flash": Price(0.10, 0.40, 0.025),
}

#: ``provider:`` or ``provider/`` before a model's name.
_PROVIDER = re.compile(r"^[A-Za-z0-9_.-]+[:/]")

#: What may follow a model's name in one of its versions: a date (``-2024-07-18``, ``-20250514``,
#: ``@20250514``, ``-0125``) or ``-latest``.
_VERSION = re.compile(r"[-@](\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|latest)")


def _price(model: str, value: Any) -> Price:
    if isinstance(value, Price):
        return value
    if isinstance(value, Mapping):
        unknown = set(value) - {"input", "output", "cached"}
        if unknown or not {"input", "output"} <= set(value):
            raise TypeError(f"budget(prices=...): the price of {model!r} is a dict with 'input' and 'output' (and "
                            f"'cached'), dollars per million tokens; got the keys {sorted(value)}")
        value = (value["input"], value["output"], value.get("cached"))
    if not isinstance(value, (tuple, list)) or len(value) not in (2, 3):
        raise TypeError(f"budget(prices=...): the price of {model!r} is (input, output) or (input, output, cached) "
                        f"dollars per million tokens, or a dict of them; not {value!r}")
    for number in value:
        if number is None:
            continue
        if number.__class__ not in (int, float) or not math.isfinite(number) or number < 0:
            raise TypeError(f"budget(prices=...): the price of {model!r} holds {number!r}; each is a number of "
                            "dollars per million tokens, 0 or more")
    return Price(*value)


def table(prices: Mapping[str, Any] | None) -> dict[str, Price]:
    """``prices`` checked (model name → Price, (input, output[, cached]) or a dict): what `find` looks in first."""
    if prices is None:
        return {}
    if not isinstance(prices, Mapping):
        raise TypeError(f"budget(prices=...) is a dict of model name to price, not {type(prices).__name__}")
    checked = {}
    for model, value in prices.items():
        if not isinstance(model, str) or not model.strip():
            raise TypeError(f"budget(prices=...): a model name is a non-empty string, not {model!r}")
        checked[model] = _price(model, value)
    return checked


def find(prices: Mapping[str, Price], model: str) -> Price | None:
    """``model``'s price: in ``prices`` (`table`), else as genai-prices knows it where installed, else
    in the shipped `PRICES`; None when none knows it."""
    return _match(prices, model) or _known_to_genai_prices(model) or _match(PRICES, model)


def _match(prices: Mapping[str, Price], model: str) -> Price | None:
    """``model``'s price in ``prices``: its own name first, then the name it is a version of (after
    dropping its provider: the name alone, or with a date after it)."""
    bare = _PROVIDER.sub("", model)
    found = prices.get(model, prices.get(bare))
    if found is not None:
        return found
    for name in prices:
        if bare.startswith(name) and _VERSION.fullmatch(bare, len(name)):
            return prices[name]
    return None


class ComputedPrice(Price):
    """A model's price as genai-prices computes it: `dollars` by the tier a prompt's size falls in;
    ``input``, ``output`` and ``cached`` per million tokens at the highest tier, so that what is
    planned with them errs high."""

    __slots__ = ("source", "_usage")

    def __init__(self, source: Any, usage: Any) -> None:
        self.source, self._usage = source, usage
        top = _PAST_EVERY_TIER
        at_top = self.dollars(top, 0)
        super().__init__(at_top * 1e6 / top, self.dollars(top, 10**6) - at_top, self.dollars(top, 0, top) * 1e6 / top)

    def dollars(self, input_tokens: float, output_tokens: float, cached_tokens: float = 0) -> float:
        usage = self._usage(input_tokens=int(input_tokens), output_tokens=int(output_tokens),
                            cache_read_tokens=int(min(cached_tokens, input_tokens)))
        return float(self.source.calc_price(usage)["total_price"])


#: What genai-prices said of each model asked about (None: it does not know it, or is not installed).
_GENAI_PRICES: dict[str, Price | None] = {}


def _known_to_genai_prices(model: str) -> Price | None:
    if model in _GENAI_PRICES:
        return _GENAI_PRICES[model]
    found = None
    try:
        import genai_prices
    except ImportError:
        pass
    else:
        bare = _PROVIDER.sub("", model)
        provider = model[: len(model) - len(bare) - 1] or None  # ``openai:gpt-4o``: the provider it names
        for provider_id in dict.fromkeys([provider, None]):
            try:
                calculation = genai_prices.calc_price(genai_prices.Usage(input_tokens=0), bare,
                                                      provider_id=provider_id)
            except LookupError:  # no such model (or provider) in its data
                continue
            found = ComputedPrice(calculation.model_price, genai_prices.Usage)
            break
    _GENAI_PRICES[model] = found
    return found
