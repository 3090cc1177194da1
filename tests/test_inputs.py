"""Inputs are checked against their annotations before anything is sent."""

import dataclasses
import enum
import sys
from typing import Any, Literal, Optional, Sequence

import pytest

import functai
from functai import FunctAIError, ai, tool
from functai.testing import ScriptedLM, tool_call


@pytest.fixture
def lm():
    script = ScriptedLM(reply=lambda request: "3")
    functai.configure(client=script)
    return script


@ai
def add(a: int, b: int) -> int:
    """Add the numbers."""


class Thing:
    """No JSON form, and only the default repr."""


class Named:
    def __repr__(self):
        return "Named('n')"


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Box:
    size: int
    extra: Any = None


@ai
def show(
    x,
    items: list[int] = (),
    maybe: Optional[str] = None,
    kind: Literal["a", "b"] = "a",
    box: Box = None,
    words: Sequence[str] = (),
    counts: dict[str, list[int]] = None,
    colour: Colour = Colour.RED,
    price: float = 0.0,
) -> str:
    """Show it."""


def refused(fn, *args, **kwargs):
    with pytest.raises(FunctAIError) as info:
        fn(*args, **kwargs)
    assert info.value.code == "input-invalid"
    return info.value.message


def test_a_wrong_type_refuses_naming_the_input_and_the_type_and_nothing_is_sent(lm, tmp_path):
    functai.configure(log_calls=str(tmp_path))
    message = refused(add, "1", "2")
    assert "input 'a' must be int" in message and "got str '1'" in message
    assert "check_inputs=False" in message
    assert lm.requests == []
    assert list(functai.read_calls(tmp_path)) == []
    assert "input 'b' must be int" in refused(add, 1, 2.5)
    assert "input 'a' must be int, got bool True" in refused(add, True, 2)
    assert add(1, 2) == 3


def test_the_check_follows_the_annotation(lm):
    assert "items[1]: expected int, got str '3'" in refused(show, 1, items=[1, "3"])
    assert "input 'maybe' must be str | None" in refused(show, 1, maybe=3)
    assert "must be Literal[\"a\", \"b\"]" in refused(show, 1, kind="c")
    assert "input 'box' must be Box, got dict" in refused(show, 1, box={"size": 1})
    assert "counts['a'][1]: expected int" in refused(show, 1, counts={"a": [1, "x"]})
    assert "input 'colour' must be Colour" in refused(show, 1, colour="red")
    assert "input 'items' must be list[int], got tuple" in refused(show, 1, items=(1, 2))
    # What fits passes: an int is a float, text is a Sequence[str], None for Optional, defaults as written.
    assert show(1, items=[1, 2], maybe=None, kind="b", box=Box(2), words="abc", counts={"a": [1]},
                colour=Colour.RED, price=3) == "3"
    assert show("x") == "3"


def test_an_object_the_model_cannot_be_shown_refuses(lm):
    message = refused(show, Thing())
    assert "input 'x' cannot be shown to the model" in message
    assert "tests.test_inputs.Thing" in message or "test_inputs.Thing" in message
    assert "0x" not in message
    assert "x[1] is a" in refused(show, [1, Thing()])
    assert "x['k'] is a" in refused(show, {"k": Thing()})
    assert "box.extra[0] is a" in refused(show, 1, box=Box(1, [Thing()]))
    assert "x is a builtins.function" in refused(show, lambda: 1)
    assert lm.requests == []
    # A value with a repr of its own is shown by it, as before.
    assert show(Named()) == "3"
    assert lm.requests[-1].messages[-1]["content"].startswith("x: \"Named('n')\"")


def test_check_inputs_false_turns_the_check_off(lm):
    with functai.settings(check_inputs=False):
        assert add("1", "2") == 3
    own = ai(check_inputs=False)(add.fn)
    assert own("1", "2") == 3
    with pytest.raises(TypeError):
        functai.configure(check_inputs="no")


def test_an_unexpected_input_is_named_first():
    with pytest.raises(TypeError, match="unexpected input 'topc'; did you mean 'topic'"):
        about.run(topc="x")
    with pytest.raises(TypeError, match="unexpected inputs 'x', 'y'"):
        about.run("t", x=1, y=2)


@ai
def about(topic: str) -> str:
    """Talk about the topic."""


def test_ai_needs_a_function():
    with pytest.raises(TypeError, match="@ai needs a function.*int 42"):
        ai(42)
    with pytest.raises(TypeError, match="@ai needs a function"):
        ai(lm="x")("not a function")


def test_the_model_asking_an_ai_function_tool_gets_its_typed_inputs_and_a_clear_refusal():
    @ai
    def measure(box: Box, colour: Colour) -> str:
        """Measure the box."""

    @ai(tools=[measure])
    def desk(q: str) -> str:
        """Desk."""

    asked = []

    def reply(request):
        if request.messages[0]["content"].startswith("Measure"):
            asked.append(request.messages[-1]["content"])
            return "big"
        if request.messages[-1]["role"] == "tool":
            return request.messages[-1]["content"]
        if not asked:
            return tool_call("measure", {"box": {"size": 3}, "colour": "red"})
        return tool_call("measure", {"box": {"size": "huge"}, "colour": "red"})

    functai.configure(client=ScriptedLM(reply=reply))
    assert desk("q") == "big"  # the dict became a Box, "red" a Colour
    assert asked == ['box: {"size": 3, "extra": null}\ncolour: "red"']
    told = desk("q")
    assert told.startswith("The tool was not run: its inputs do not fit (input 'box' must be Box: ")


def test_a_conversation_refuses_a_wrong_input_before_writing_a_turn(lm):
    chat = add.conversation("sums")
    assert "input 'a' must be int" in refused(chat, "1", "2")
    assert chat.turns == [] and lm.requests == []
    assert chat(1, 2) == 3


def _nested(depth: int, make) -> Any:
    value: Any = {}
    for _ in range(depth):
        value = make(value)
    return value


@ai
def take(data: dict) -> str:
    """Take the data."""


@ai
def take_anything(data) -> str:
    """Take the data."""


@pytest.mark.parametrize("check", [True, False], ids=["checked", "unchecked"])
@pytest.mark.parametrize("make", [lambda inner: {"a": inner}, lambda inner: [inner]], ids=["dicts", "lists"])
def test_an_input_nested_too_deeply_is_a_coded_error_before_the_model_is_asked(lm, check, make):
    functai.configure(check_inputs=check)
    for fn in (take, take_anything):
        data = _nested(max(5000, 5 * sys.getrecursionlimit()), make)
        if fn is take and type(data) is not dict:
            continue
        with pytest.raises(FunctAIError) as info:
            fn(data)
        assert info.value.code == ("input-invalid" if check else "json-too-deep"), info.value
        assert "nested too deeply" in info.value.message
    assert lm.requests == []
