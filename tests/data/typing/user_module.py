"""A user's module as `mypy --strict` reads it: AI functions keep their signatures (test_typed_functions.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from typing_extensions import assert_type  # typing.assert_type from Python 3.11 on

from functai_budget import budget
from functai_cache import cache
from functai_otel import otel

import functai
from functai import ai


@ai
def capital(country: str) -> str:
    """Name the capital city of the country."""
    raise NotImplementedError  # the model answers: the body never runs


@ai(temperature=0.2, plugins=[cache(), budget(tokens=10_000), otel()])
def count(words: list[str], exact: bool = False) -> int:
    """Count the words."""
    raise NotImplementedError


guard = functai.Plugin("guard", version="1.0.0")


@guard.request
def costly_models_need_a_reason(event: functai.events.Request) -> functai.Change | None:
    assert_type(event.request.model, str)
    assert_type(event.endpoint.provider, str)
    assert_type(event.turn, str | None)
    return None


@guard.tool_call
def no_refunds_on_fridays(event: functai.events.ToolCall) -> functai.Change | None:
    assert_type(event.input["amount"], Any)
    event.ask("a refund", decide=lambda call: call.name == "refund")
    return None


def check() -> None:
    assert_type(capital("Peru"), str)
    value, record = capital.run("Peru")
    assert_type(value, str)
    assert_type(record, functai.CallRecord)
    assert_type(capital.run(country="Peru"), functai.Result[str])
    assert_type(count(["a"], exact=True), int)

    async def main() -> None:
        assert_type(await capital.acall("Peru"), str)
        assert_type((await capital.arun("Peru")).value, str)
        async with capital.astream("Peru") as events:
            async for event in events:
                assert_type(event, functai.StreamEvent)
        assert_type(events.value, str | None)

    asyncio.run(main())
    with capital.stream("Peru") as stream:
        for event in stream:
            assert_type(event, functai.StreamEvent)
    assert_type(stream.value, str | None)
    assert_type(capital.with_instruction("Name it.")("Peru"), str)
