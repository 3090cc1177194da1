"""A tool's inputs are read by its parameters' annotations — the model's arguments, a person's edit
on approving, a plugin's change — before any handler or approval sees them: what is approved is
what runs, with the types the tool declares."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import decimal
import enum
import json
import os
import subprocess
import sys
import textwrap
from typing import Literal, Optional

import functai_approval
import pydantic
import pytest

import functai
from functai import Change, FunctAIError, Plugin, Waiting, ai, tool
from functai.testing import ScriptedLM, tool_call

pytestmark = pytest.mark.usefixtures("functai_isolated")

RAN: list[object] = []


@tool(effects="changes")
def refund(order: str, amount: int) -> str:
    """Refund an amount on an order."""
    RAN.append(amount)
    return f"refunded {amount} on {order}"


@tool(effects="changes")
def pay(order: str, amount: float) -> str:
    """Pay an amount for an order."""
    RAN.append(amount)
    return f"paid {amount} for {order}"


@ai(tools=[refund, pay])
def support(request: str) -> str:
    """Support the customer."""


@pytest.fixture(autouse=True)
def _ran():
    RAN.clear()
    yield
    RAN.clear()


BAD_AMOUNTS = ["300 EUR", {"value": 300}, True, -1e308, 3.5, float("nan"), [300], None]


def tool_results(request: functai.Request) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "tool"]


@pytest.mark.parametrize("driver", ["sync", "async", "stream"])
@pytest.mark.parametrize("bad", BAD_AMOUNTS, ids=repr)
def test_the_models_arguments_that_do_not_fit_never_reach_the_tool_and_the_model_is_told(driver, bad):
    lm = ScriptedLM([tool_call("refund", {"order": "A1", "amount": bad}), tool_call("refund", {"order": "A1",
                                                                                           "amount": 300}), "Done."])
    with functai.settings(client=lm):
        if driver == "sync":
            result = support.run("refund A1")
        elif driver == "async":
            result = asyncio.run(support.arun("refund A1"))
        else:
            with support.stream("refund A1") as stream:
                list(stream)
            result = stream
    assert result.value == "Done."
    assert RAN == [300]  # only the corrected call ran
    told = tool_results(lm.requests[1])[0]
    assert told.startswith("The tool was not run: its inputs do not fit (input 'amount' must be int: ")
    first, second = result.record.tool_calls
    assert first["error"].startswith("input-invalid: input 'amount' must be int") and first["input"]["order"] == "A1"
    assert second["output"] == "refunded 300 on A1" and "error" not in second


def test_a_model_that_keeps_asking_wrongly_fails_the_call_tool_input_invalid():
    wrong = tool_call("refund", {"order": "A1", "amount": "lots"})
    lm = ScriptedLM([wrong] * 5)
    with functai.settings(client=lm, max_tool_retries=2):
        with pytest.raises(FunctAIError) as failed:
            support("refund A1")
    assert failed.value.code == "tool-input-invalid"
    assert "3 times" in failed.value.message and "input 'amount' must be int" in failed.value.message
    assert len(lm.requests) == 3 and RAN == []


def test_unknown_and_missing_inputs_are_told_too():
    lm = ScriptedLM([tool_call("refund", {"order": "A1", "amount": 5, "to": "mallory"}),
                     tool_call("refund", {"amount": 5}), "Done."])
    with functai.settings(client=lm):
        assert support("refund") == "Done."
    told = tool_results(lm.requests[2])
    assert "refund takes no input 'to'" in told[0]
    assert "input 'order' (str) is missing" in told[1]
    assert RAN == []


def test_handlers_and_the_approval_never_see_inputs_that_do_not_fit(install):
    install(functai_approval.plugin)
    seen = []
    watcher = Plugin("watcher", tool_call=lambda event: seen.append(dict(event.input)))
    lm = ScriptedLM([tool_call("refund", {"order": "A1", "amount": "300 EUR"}), "Sorry."])
    with functai.settings(client=lm, plugins=[watcher], approve="changes"):
        assert support("refund A1") == "Sorry."  # no approval-required: nothing was asked
    assert seen == [] and RAN == []


def test_a_plugins_change_that_does_not_fit_stops_the_call():
    shaper = Plugin("shaper", version="1.0", tool_call=lambda event: Change(inputs={"amount": "half"}))
    lm = ScriptedLM([tool_call("refund", {"order": "A1", "amount": 300}), "Done."])
    with functai.settings(client=lm, plugins=[shaper]):
        with pytest.raises(FunctAIError) as failed:
            support("refund A1")
    assert failed.value.code == "plugin-change" and "'shaper'" in failed.value.message
    assert "input 'amount' must be int" in failed.value.message and RAN == []


class Address(pydantic.BaseModel):
    street: str
    city: str


class Parcel(pydantic.BaseModel):
    to: Address
    grams: int = pydantic.Field(gt=0)


@dataclasses.dataclass
class Node:
    name: str
    children: list["Node"]


RECEIVED: list[object] = []


@tool(effects="reads")
def ship(parcel: Parcel, tree: Node) -> str:
    """Ship a parcel."""
    RECEIVED.extend([parcel, tree])
    return "shipped"


@ai(tools=[ship])
def dispatch(request: str) -> str:
    """Dispatch the parcel."""


def test_a_pydantic_parameter_is_received_as_the_model_and_pydantics_own_checks_hold():
    RECEIVED.clear()
    good = {"parcel": {"to": {"street": "1 Main St", "city": "Lyon"}, "grams": 300},
            "tree": {"name": "root", "children": [{"name": "leaf", "children": []}]}}
    bad = {**good, "parcel": {**good["parcel"], "grams": -5}}
    lm = ScriptedLM([tool_call("ship", bad), tool_call("ship", good), "Done."])
    with functai.settings(client=lm):
        assert dispatch("ship it") == "Done."
    parcel, tree = RECEIVED
    assert isinstance(parcel, Parcel) and isinstance(parcel.to, Address) and parcel.grams == 300
    assert tree == Node("root", [Node("leaf", [])])
    assert "input 'parcel' must be Parcel" in tool_results(lm.requests[1])[0]


def _refs(value):
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "$ref":
                yield item
            else:
                yield from _refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item)


def test_the_parameter_schema_keeps_its_defs_at_the_root_where_every_ref_points():
    [schema] = dispatch.tool_schemas(("ship",))
    parameters = schema["parameters"]
    refs = list(_refs(parameters))
    assert refs  # a nested pydantic model and a recursive dataclass both refer into $defs
    for ref in refs:
        assert ref.startswith("#/$defs/"), ref
        assert ref[len("#/$defs/"):] in parameters["$defs"], ref
    assert all("$defs" not in prop for prop in parameters["properties"].values())


# --- a person's edit ---------------------------------------------------------------------------

def _waiting(install, store, **options):
    install(functai_approval.plugin)
    functai.configure(client=ScriptedLM([tool_call("pay", {"order": "A1", "amount": 80}), "Done."]))
    chat = support.conversation("c", store=store, approve="changes", **options)
    with pytest.raises(Waiting) as info:
        chat("pay for A1")
    return chat, info.value.turn


@pytest.mark.parametrize("bad", ["abc", "80 EUR", {"v": 1}, True, float("inf")], ids=repr)
def test_a_persons_edit_that_does_not_fit_is_refused_and_the_turn_keeps_waiting(install, tmp_path, bad):
    chat, turn = _waiting(install, str(tmp_path / "s"))
    key = turn.approvals[0]["key"]
    with pytest.raises(FunctAIError) as refused:
        turn.approve(key, inputs={"amount": bad}, by="ana")
    assert refused.value.code == "input-invalid"
    assert "input 'amount' must be float" in refused.value.message
    assert chat.turn(turn.id).state == "waiting" and chat.turn(turn.id).waits[-1]["answers"] == {}
    chat.turn(turn.id).approve(key, inputs={"amount": 65}, by="ana")
    assert chat.turn(turn.id).resume() == "Done."
    assert RAN == [65]


def test_an_edit_is_at_most_a_million_characters_of_json(install, tmp_path):
    chat, turn = _waiting(install, str(tmp_path / "s"))
    with pytest.raises(FunctAIError) as refused:
        turn.approve(turn.approvals[0]["key"], inputs={"order": "x" * 20_000_000})
    assert refused.value.code == "input-invalid" and "at most 1,000,000" in refused.value.message
    assert chat.turn(turn.id).state == "waiting"


def test_an_edit_from_a_view_without_the_function_is_checked_by_the_schema_the_question_kept(install, tmp_path):
    store = str(tmp_path / "s")
    chat, turn = _waiting(install, store)
    view = functai.Conversation.open("c", store=store)  # as the console opens it
    [waiting] = [t for t in view.all_turns() if t.state == "waiting"]
    key = waiting.approvals[0]["key"]
    for bad in ("abc", {"v": 1}, True):
        with pytest.raises(FunctAIError) as refused:
            waiting.approve(key, inputs={"amount": bad})
        assert refused.value.code == "input-invalid" and "amount must be number" in refused.value.message
    waiting.approve(key, inputs={"amount": 70}, by="console")
    assert chat.turn(turn.id).resume() == "Done."
    assert RAN == [70]


def test_a_stream_refuses_an_edit_that_does_not_fit(install):
    install(functai_approval.plugin)
    lm = ScriptedLM([tool_call("pay", {"order": "A1", "amount": 80}), "Done."])
    with functai.settings(client=lm, approve="changes"):
        with support.stream("pay for A1") as stream:
            for event in stream:
                if event.kind == "waiting":
                    with pytest.raises(FunctAIError) as refused:
                        stream.approve(inputs={"amount": "abc"})
                    assert refused.value.code == "input-invalid" and "must be float" in refused.value.message
                    stream.approve(inputs={"amount": 60})
    assert stream.value == "Done." and RAN == [60]


SHOP = textwrap.dedent('''
    import json, os
    import functai
    from functai import ai, tool
    from functai.testing import ScriptedLM

    if os.environ.get("SHOP_SCRIPT"):
        functai.configure(client=ScriptedLM(json.loads(os.environ["SHOP_SCRIPT"])))

    @tool(effects="changes")
    def pay(order: str, amount: float) -> str:
        """Pay an amount for an order."""
        return f"paid {amount} for {order}"

    @ai(tools=[pay])
    def desk(request: str) -> str:
        """Help."""
''')


def test_the_cli_refuses_an_edit_naming_the_inputs_type(install, tmp_path, monkeypatch):
    (tmp_path / "shopcli.py").write_text(SHOP)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("shopcli", None)
    install(functai_approval.plugin)
    import shopcli

    store = str(tmp_path / "s")
    functai.configure(client=ScriptedLM([tool_call("pay", {"order": "A1", "amount": 80}), "Done."]))
    chat = shopcli.desk.conversation("c", store=store, approve="changes")
    with pytest.raises(Waiting):
        chat("pay")
    env = {**os.environ, "SHOP_SCRIPT": json.dumps(["Done."]), "FUNCTAI_LOAD_PLUGINS": "approval",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()])}
    env.pop("FUNCTAI_DISABLE_PLUGINS", None)
    done = subprocess.run([sys.executable, "-m", "functai", "approve", store, "c", "--input", "amount=abc"],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "input-invalid" in done.stderr and "input 'amount' must be float" in done.stderr
    assert chat.head.state == "waiting"
    sys.modules.pop("shopcli", None)


@dataclasses.dataclass
class Chain:
    next: "Chain | None" = None


@tool(effects="changes")
def store_chain(chain: Chain) -> str:
    """Store a chain."""
    return "stored"


@ai(tools=[store_chain])
def chainer(request: str) -> str:
    """Store the chain."""


def test_an_edit_nested_too_deeply_for_the_kept_schema_is_refused_not_a_crash(install, tmp_path):
    install(functai_approval.plugin)
    store = str(tmp_path / "s")
    functai.configure(client=ScriptedLM([tool_call("store_chain", {"chain": {"next": None}}), "Done."]))
    chat = chainer.conversation("deep", store=store, approve="changes")
    with pytest.raises(Waiting):
        chat("store it")
    [waiting] = [t for t in functai.Conversation.open("deep", store=store).all_turns() if t.state == "waiting"]
    for depth in (400, 5000):  # deeper than the schema's check can walk; than JSON can be written
        deep: dict = {"next": None}
        for _ in range(depth):
            deep = {"next": deep}
        with pytest.raises(FunctAIError) as refused:
            waiting.approve(waiting.approvals[0]["key"], inputs={"chain": deep})
        assert refused.value.code == "input-invalid", depth
    assert waiting.state == "waiting"


@tool(effects="changes")
def send_parcel(parcel: Parcel) -> str:
    """Send a parcel."""
    RAN.append(parcel)
    return "sent"


@ai(tools=[send_parcel])
def post_office(request: str) -> str:
    """Post it."""


def test_an_edit_the_kept_schema_lets_through_but_the_types_refuse_runs_nothing_and_the_model_is_told(
        install, tmp_path):
    install(functai_approval.plugin)
    store = str(tmp_path / "s")
    good = {"to": {"street": "1 Main St", "city": "Lyon"}, "grams": 300}
    lm = ScriptedLM([tool_call("send_parcel", {"parcel": good}), "Understood."])
    chat = post_office.conversation("edit", store=store, approve="changes", client=lm)
    with pytest.raises(Waiting):
        chat("send it")
    [waiting] = [t for t in functai.Conversation.open("edit", store=store).all_turns() if t.state == "waiting"]
    waiting.approve(waiting.approvals[0]["key"], inputs={"parcel": {**good, "grams": -5}})  # the schema has no bound
    assert chat.turn(waiting.id).resume() == "Understood."
    assert RAN == []
    told = [m["content"] for m in lm.requests[1].messages if m["role"] == "tool"][0]
    assert told.startswith("The tool was not run: the inputs a person gave on approving it do not fit it (input "
                           "'parcel' must be Parcel")


def test_an_edit_given_as_the_tools_own_types_is_taken_as_their_json_data(install, tmp_path):
    """A person's code edits with the objects the tool takes (a pydantic model, a dataclass): they
    are checked and recorded as the JSON data a model would write, and the tool gets its types."""
    install(functai_approval.plugin)
    RECEIVED.clear()
    start = {"parcel": {"to": {"street": "1 Main St", "city": "Lyon"}, "grams": 300},
             "tree": {"name": "root", "children": []}}

    @tool(effects="changes")
    def ship_now(parcel: Parcel, tree: Node) -> str:
        """Ship a parcel now."""
        RECEIVED.extend([parcel, tree])
        return "shipped"

    @ai(tools=[ship_now])
    def send(request: str) -> str:
        """Send the parcel."""

    functai.configure(client=ScriptedLM([tool_call("ship_now", start), "Done."]))
    chat = send.conversation("c", store=str(tmp_path / "s"), approve="changes")
    with pytest.raises(Waiting) as info:
        chat("ship it")
    turn = info.value.turn
    key = turn.approvals[0]["key"]
    with pytest.raises(FunctAIError) as refused:
        turn.approve(key, inputs={"parcel": Parcel(to=Address(street="2 Rue", city="Nice"), grams=1).model_copy(
            update={"grams": -1})})
    assert refused.value.code == "input-invalid" and "input 'parcel' must be Parcel" in refused.value.message
    turn.approve(key, inputs={"parcel": Parcel(to=Address(street="2 Rue", city="Nice"), grams=5),
                              "tree": Node("top", [])}, by="ana")
    assert turn.answers[key]["inputs"] == {"parcel": {"to": {"street": "2 Rue", "city": "Nice"}, "grams": 5},
                                           "tree": {"name": "top", "children": []}}
    assert chat.turn(turn.id).resume() == "Done."
    parcel, tree = RECEIVED
    assert isinstance(parcel, Parcel) and parcel.to.city == "Nice" and parcel.grams == 5 and tree == Node("top", [])


class Dated(pydantic.BaseModel):
    when: datetime.date
    amount: decimal.Decimal


def test_an_edit_is_json_data_never_a_repr(install, tmp_path):
    """A value JSON cannot write is refused, naming it: kept as its repr, a Decimal given for a text
    input ran as the text "Decimal('12.50')". A pydantic object is its own JSON form (dates as ISO)."""
    install(functai_approval.plugin)
    got = []

    @tool(effects="changes")
    def note(text: str, dated: Dated) -> str:
        """Write a note."""
        got.append((text, dated))
        return "ok"

    @ai(tools=[note])
    def clerk(request: str) -> str:
        """Clerk."""

    functai.configure(client=ScriptedLM([tool_call("note", {"text": "hi", "dated": {"when": "2024-01-02",
                                                                                     "amount": "1.5"}}), "done"]))
    chat = clerk.conversation("c", store=str(tmp_path / "s"), approve="changes")
    with pytest.raises(Waiting) as info:
        chat("go")
    turn = info.value.turn
    key = turn.approvals[0]["key"]
    for bad in ({"text": decimal.Decimal("12.50")}, {"text": datetime.date(2024, 3, 4)},
                {"dated": {"when": datetime.date(2024, 3, 4), "amount": "2"}}):
        with pytest.raises(FunctAIError) as refused:
            turn.approve(key, inputs=bad)
        assert refused.value.code == "input-invalid" and "is not JSON data" in refused.value.message
    turn.approve(key, inputs={"dated": Dated(when=datetime.date(2024, 3, 4), amount=decimal.Decimal("12.50"))})
    assert chat.turn(turn.id).resume() == "done"
    assert got == [("hi", Dated(when=datetime.date(2024, 3, 4), amount=decimal.Decimal("12.50")))]


class Size(str, enum.Enum):
    ONE = "1"
    TWO = "2"


@pytest.mark.parametrize("tp, typed, read", [
    (str, "123", "123"), (str, '"123"', "123"), (str, "abc", "abc"), (str, "NaN", "NaN"),
    (Optional[str], "123", "123"), (Optional[str], "null", None), (Literal["1", "2"], "2", "2"),
    (Size, "2", "2"), (int, "123", 123), (Optional[int], "null", None), (float, "NaN", "NaN"),
    (list[str], '["a", 1]', ["a", 1]), (list[int], "[1, 2]", [1, 2]), (dict[str, int], "{}", {}),
], ids=repr)
def test_what_a_person_types_is_json_the_input_takes_else_the_text(tp, typed, read):
    """`functai approve --input` and the console's form read a field so: 123 typed for an order that is
    text (or text or None, or one of some texts) is the text "123"."""
    from functai.cli import read_typed

    parameters = functai.Tool(_typed_tool(tp)).parameters
    assert read_typed(typed, "value", parameters) == read
    assert read_typed(typed) == (typed if typed in ("abc", "NaN") else json.loads(typed))  # no schema: JSON


def _typed_tool(tp):
    def take(value):
        """Take a value."""
        return value

    take.__annotations__ = {"value": tp, "return": str}
    return take
