"""Inputs a record keeps as JSON data are read back as the values a call takes: a resumed turn and a
rated call asked again pass a dataclass, an enum, a set as they were first given. Inputs that no
longer fit the function are refused with a code (resume) or left out (evaluation), never a failure
counted against the function."""

from __future__ import annotations

import dataclasses
import enum

import functai_approval
import pytest

import functai
from functai.testing import ScriptedLM, tool_call


class Size(enum.Enum):
    SMALL = "small"
    LARGE = "large"


@dataclasses.dataclass
class Order:
    id: str
    size: Size
    tags: set[str]


@functai.tool(effects="changes")
def ship(order: str) -> str:
    """Ship an order."""
    return f"shipped {order}"


def test_a_resumed_turn_is_given_its_inputs_as_they_were_first_given(tmp_path, install):
    install(functai_approval.plugin)

    @functai.ai(client=ScriptedLM([tool_call("ship", {"order": "A1"}), "done"]), tools=[ship])
    def desk(order: Order) -> str:
        """Handle the order."""

    chat = desk.conversation("c", store=str(tmp_path), approve="changes")
    given = Order("A1", Size.LARGE, {"fragile", "gift"})
    with pytest.raises(functai.Waiting) as waiting:
        chat(given)
    turn = waiting.value.turn
    turn.approve()
    assert turn.resume() == "done"  # it failed input-invalid: the order came back as a dict


def test_a_rated_call_is_asked_again_with_its_inputs_and_one_that_no_longer_fits_is_left_out(tmp_path):
    log = str(tmp_path / "calls")

    def answer(request):
        return "large" if "large" in str(request.messages) else "small"

    @functai.ai(client=ScriptedLM(reply=answer), log_calls=log)
    def size_of(order: Order) -> str:
        """Its size."""

    _, record = size_of.run(Order("A1", Size.LARGE, {"x"}))
    functai.rate(record, good=True, log=log)
    result = functai.evaluate(size_of, log=log)
    assert (result.score, len(result.rows), result.skipped) == (1.0, 1, [])

    @functai.ai(client=ScriptedLM(reply=answer), log_calls=log)
    def size_of(parcel: Order) -> str:  # noqa: F811  (its input renamed since the call was rated)
        """Its size."""

    result = functai.evaluate(size_of, log=log)
    assert result.rows == [] and [why for _, why in result.skipped] == [
        "its inputs do not fit size_of now (size_of(parcel: 'Order') -> 'str': unexpected input 'order'; "
        "its inputs are parcel)"]
