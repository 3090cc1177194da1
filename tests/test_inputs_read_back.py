"""Inputs a record keeps as JSON data are read back as the values a call takes: a resumed turn and a
rated call asked again pass a dataclass, an enum, a set as they were first given. Inputs that no
longer fit the function are refused with a code (resume) or left out (evaluation), never a failure
counted against the function."""

from __future__ import annotations

import dataclasses
import datetime
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


def shown_across_a_resume(store, make, *args):
    """What the model was shown of a turn's inputs before the turn waited and after it was resumed;
    ``make(client)`` makes the AI function, which asks for the tool ``ship``."""
    shown = []

    def model(request):
        shown.append(request.messages[1]["content"])
        return "done" if request.messages[-1]["role"] == "tool" else tool_call("ship", {"order": "1"})

    with pytest.raises(functai.Waiting) as waiting:
        make(ScriptedLM(reply=model)).conversation("c", store=store, approve="changes")(*args)
    waiting.value.turn.approve()
    assert waiting.value.turn.resume() == "done"
    return shown


def test_a_resumed_turn_shows_its_inputs_as_the_first_request_did(tmp_path, install):
    """An int given for a float is recorded as 3 and shown as 3: read back as 3.0, the request after
    the resume would show the turn's input otherwise than the one before it."""
    install(functai_approval.plugin)

    def weigh_with(client):
        @functai.ai(client=client, tools=[ship])
        def weigh(kilos: float) -> str:
            """Weigh."""

        return weigh

    assert shown_across_a_resume(str(tmp_path), weigh_with, 3) == ["kilos: 3", "kilos: 3"]


def test_an_input_json_cannot_give_back_is_resumed_as_recorded_and_shown_as_before(tmp_path, install):
    """A date is recorded as its text; the resumed turn is given that text, which shows the model
    exactly what the first request showed (it was refused resume-inputs: a turn with a date never resumed)."""
    install(functai_approval.plugin)

    def plan_with(client):
        @functai.ai(client=client, tools=[ship])
        def plan(day: datetime.date, ids: dict[int, str]) -> str:
            """Plan the day."""

        return plan

    shown = shown_across_a_resume(str(tmp_path), plan_with, datetime.date(2025, 1, 2), {7: "a"})
    assert shown[0] == shown[1] and "2025, 1, 2" in shown[0]


@pytest.mark.parametrize("where", ["function", "conversation"])
def test_inputs_given_with_the_check_off_are_resumed_and_evaluated_unchecked(tmp_path, install, where):
    """``check_inputs=False`` lets a call take inputs its annotations do not describe; reading them back
    must not refuse what the call itself took (a resume was resume-inputs, an evaluation left it out)."""
    install(functai_approval.plugin)
    log = str(tmp_path / "calls")
    own = {"check_inputs": False} if where == "function" else {}

    @functai.ai(client=ScriptedLM(reply=lambda request: "done" if request.messages[-1]["role"] == "tool"
                                  else tool_call("ship", {"order": "1"})), tools=[ship], log_calls=log, **own)
    def count(n: int) -> str:
        """Count."""

    chat = count.conversation("c", store=str(tmp_path / "turns"), approve="changes",
                              **({} if own else {"check_inputs": False}))
    with pytest.raises(functai.Waiting) as waiting:
        chat("seven")
    waiting.value.turn.approve()
    assert waiting.value.turn.resume() == "done"
    if where == "function":
        record = list(functai.read_calls(log))[-1]
        functai.rate(record, good=True, log=log)
        result = functai.evaluate(count, log=log)
        assert (len(result.rows), result.skipped) == (1, [])


def test_an_input_edited_by_hand_to_another_type_is_refused_on_resume(tmp_path, install):
    install(functai_approval.plugin)

    @functai.ai(client=ScriptedLM([tool_call("ship", {"order": "1"}), "done"]), tools=[ship])
    def count(n: int) -> str:
        """Count."""

    with pytest.raises(functai.Waiting) as waiting:
        count.conversation("c", store=str(tmp_path), approve="changes")(7)
    path = tmp_path / "c.jsonl"
    path.write_text(path.read_text().replace('"n":7', '"n":"seven"'))
    turn = count.conversation("c", store=str(tmp_path), approve="changes").turns[-1]
    turn.approve()
    with pytest.raises(functai.FunctAIError) as info:
        turn.resume()
    assert info.value.code == "resume-inputs" and "check_inputs=False" not in str(info.value)
    assert turn.state == "waiting"


def test_a_rated_call_with_a_date_is_asked_again_as_it_was_shown(tmp_path):
    log = str(tmp_path / "calls")
    shown = []

    def answer(request):
        shown.append(request.messages[1]["content"])
        return "monday"

    @functai.ai(client=ScriptedLM(reply=answer), log_calls=log)
    def weekday(day: datetime.date) -> str:
        """Its weekday."""

    _, record = weekday.run(datetime.date(2025, 1, 6))
    functai.rate(record, good=True, log=log)
    result = functai.evaluate(weekday, log=log)
    assert (result.score, result.skipped) == (1.0, [])
    assert shown[0] == shown[1] == 'day: "datetime.date(2025, 1, 6)"'
    assert [r.inputs for r in functai.read_calls(log)][-1] == {"day": "datetime.date(2025, 1, 6)"}


def test_text_given_for_a_date_with_the_check_off_is_shown_as_before_after_a_resume(tmp_path, install):
    """With the check off the text may have been given as text: it stays text (shown unquoted), not a
    repr standing for a date."""
    install(functai_approval.plugin)

    def plan_with(client):
        @functai.ai(client=client, tools=[ship], check_inputs=False)
        def plan(day: datetime.date) -> str:
            """Plan the day."""

        return plan

    assert shown_across_a_resume(str(tmp_path), plan_with, "2025-01-02") == ["day: 2025-01-02", "day: 2025-01-02"]


def test_an_input_a_turn_start_handler_changed_is_checked_before_it_is_sent(tmp_path):
    """The conversation checks what it is given, before turn_start runs: what a handler puts instead is
    checked by the call (else the turn was answered with it, and could never be resumed)."""
    lm = ScriptedLM(["ok"])

    @functai.ai(client=lm)
    def count(n: int) -> str:
        """Count."""

    chat = count.conversation("c", store=str(tmp_path), plugins=[
        functai.Plugin("bad", turn_start=lambda turn: functai.Change(inputs={"n": "seven"}))])
    with pytest.raises(functai.FunctAIError) as refused:
        chat(7)
    assert refused.value.code == "input-invalid" and lm.requests == []
