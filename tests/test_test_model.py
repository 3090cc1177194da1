"""lm="test": the offline model a newcomer names, for any output type, tools and approvals."""

import asyncio
import dataclasses
import datetime
import enum
import ipaddress
import json
import os
import pathlib
import subprocess
import sys
import uuid
import zoneinfo
from typing import Annotated, Any, Literal, Optional

import attrs
import functai_approval
import pydantic
import pytest

import functai
from functai import ai, tool
from functai.testing import TestModel


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Node:
    label: str
    next: Optional["Node"] = None


class Person(pydantic.BaseModel):
    name: str = pydantic.Field(min_length=6)
    age: int = pydantic.Field(gt=17, lt=20)
    share: float = pydantic.Field(gt=0, lt=0.5)
    born: datetime.date
    colour: Colour


@attrs.define
class Team:
    lead: Person
    members: list[Node]
    scores: dict[str, float]
    pair: tuple[int, str]
    tags: set[str]


OUTPUTS = [
    (str, "test"), (int, 0), (float, 0.0), (bool, True), (list[str], ["test"]), (dict[str, int], {"test": 0}),
    (Literal["yes", "no"], "yes"), (Colour, Colour.RED), (Optional[int], 0), (Any, "test"),
    (Node, Node("test")),
    (Person, Person(name="testxx", age=18, share=0.25, born=datetime.date(2000, 1, 1), colour=Colour.RED)),
]


@pytest.mark.parametrize("output, expected", OUTPUTS, ids=[str(o) for o, _ in OUTPUTS])
def test_any_output_type_gets_a_valid_value_and_the_record_says_the_test_model_made_it(output, expected):
    functai.configure(lm="test")

    @ai
    def answer(question: str) -> output:
        """Answer."""

    value, record = answer.run("anything")
    assert value == expected and type(value) is type(expected)
    assert record.model == "test" and record.reasoning == TestModel.MARK
    assert record.error is None and record.attempts == 1


def test_nested_classes_of_every_kind_come_back_whole():
    @ai(lm="test")
    def team(brief: str) -> Team:
        """Make a team."""

    value = team("a small one")
    assert isinstance(value.lead, Person) and value.lead.born == datetime.date(2000, 1, 1)
    assert value.members == [Node("test")]
    assert value.scores == {"test": 0.0} and value.pair == (0, "test") and value.tags == {"test"}


def test_the_test_model_is_never_a_default():
    @ai
    def answer(question: str) -> str:
        """Answer."""

    with pytest.raises(functai.FunctAIError) as error:
        answer("anything")
    assert error.value.code == "no-model" and "lm='test' is an offline test model" in str(error.value)


def _program(body: str, **env: str) -> subprocess.CompletedProcess:
    program = (
        "import functai\n"
        "from functai import ai\n"
        "@ai\n"
        "def capital(country: str) -> str:\n"
        "    '''The capital city.'''\n" + body
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FUNCTAI_", "OPENAI_"))}
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env={**clean, **env})


def test_functai_lm_test_names_it_and_any_other_bare_name_stays_an_openai_model():
    done = _program("value, record = capital.run('Peru')\nprint(value, record.model)\n", FUNCTAI_LM="test")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["test", "test"]
    elsewhere = _program(
        "functai.configure(http_retries=0)\n"
        "try:\n    capital('Peru')\nexcept functai.FunctAIError as e:\n    print(e.code)\n",
        FUNCTAI_LM="scripted", OPENAI_API_KEY="sk-not-a-real-key", OPENAI_BASE_URL="http://127.0.0.1:9/v1",
    )
    assert elsewhere.stdout.strip() == "model-unreachable", elsewhere.stderr


ran: list[tuple[str, Any]] = []


@tool(effects="reads")
def look_up(word: str, times: int) -> str:
    """Look a word up."""
    ran.append(("look_up", (word, times)))
    return f"{word}: found"


@tool(effects="changes")
def save(person: Person, note: Optional[str] = None) -> str:
    """Save a person."""
    ran.append(("save", Person.model_validate(person)))
    return "saved"


@ai(tools=[look_up, save])
def desk(question: str) -> int:
    """Answer with a number, using the tools."""


@pytest.fixture
def tools_ran():
    ran.clear()
    functai.configure(lm="test")
    yield ran
    ran.clear()


def _check_tool_steps(record):
    assert [c["name"] for c in record.tool_calls] == ["look_up", "save"]
    assert record.tool_calls[0]["input"] == {"word": "test", "times": 0}
    assert all("output" in c for c in record.tool_calls)
    assert record.attempts == 2 and record.output == 0 and record.model == "test"


def test_each_tool_offered_is_called_once_with_a_valid_input_then_it_answers(tools_ran):
    value, record = desk.run("how many?")
    _check_tool_steps(record)
    assert [name for name, _ in tools_ran] == ["look_up", "save"]
    assert tools_ran[1][1].born == datetime.date(2000, 1, 1)


def test_async_and_streamed_calls_do_the_same(tools_ran):
    _, record = asyncio.run(desk.arun("how many?"))
    _check_tool_steps(record)
    with desk.stream("how many?") as stream:
        kinds = [event.kind for event in stream]
    assert kinds == ["tool_call", "tool_result", "tool_call", "tool_result", "text", "done"]
    _check_tool_steps(stream.record)
    assert [name for name, _ in tools_ran] == ["look_up", "save"] * 2


def test_tool_choice_and_parallel_tool_calls_are_followed(tools_ran):
    with functai.settings(parallel_tool_calls=False):
        _, record = desk.run("how many?")
    assert [c["name"] for c in record.tool_calls] == ["look_up", "save"] and record.attempts == 3
    with functai.settings(tool_choice="none"):
        _, record = desk.run("how many?")
    assert record.tool_calls == [] and record.attempts == 1
    with functai.settings(tool_choice="save"):  # the named tool first; then tool_choice goes back to auto
        _, record = desk.run("how many?")
    assert [c["name"] for c in record.tool_calls] == ["save", "look_up"] and record.attempts == 3
    assert record.settings["tool_choice"] == "save" and record.settings["tool_choice_after_tools"] == "auto"


def test_a_tool_that_needs_approval_is_refused_in_a_plain_call(tools_ran, install):
    install(functai_approval.plugin)
    with functai.settings(approve="changes"):
        with pytest.raises(functai.ApprovalError) as error:
            desk("how many?")
    assert error.value.code == "approval-required" and error.value.approval["name"] == "save"
    assert [name for name, _ in tools_ran] == ["look_up"]


@pytest.mark.parametrize("answer", ["approve", "deny"])
def test_a_conversation_turn_waits_then_goes_on_as_answered(tools_ran, install, tmp_path, answer):
    install(functai_approval.plugin)
    chat = desk.conversation("c1", store=str(tmp_path), approve="changes")
    with pytest.raises(functai.Waiting) as waiting:
        chat("how many?")
    assert [a["name"] for a in waiting.value.approvals] == ["save"]
    turn = desk.conversation("c1", store=str(tmp_path), approve="changes").head
    if answer == "approve":
        turn.approve(by="tester")
    else:
        turn.deny(reason="not today", by="tester")
    assert turn.resume() == 0
    assert [name for name, _ in tools_ran] == (["look_up", "save"] if answer == "approve" else ["look_up"])
    chat = desk.conversation("c1", store=str(tmp_path))
    assert chat.head.state == "done" and chat.head.outputs == {"output": 0}


def test_a_streamed_conversation_turn_is_answered_at_the_stream(tools_ran, install, tmp_path):
    install(functai_approval.plugin)
    chat = desk.conversation("c2", store=str(tmp_path), approve="changes")
    with chat.stream("how many?") as stream:
        for event in stream:
            if event.kind == "waiting":
                stream.deny(reason="no")
    assert stream.value == 0
    assert [c["name"] for c in stream.record.tool_calls] == ["look_up", "save"]
    assert stream.record.tool_calls[1]["refused"]
    with pytest.raises(functai.Waiting) as waiting:  # a second turn, shown the first, calls each tool again
        asyncio.run(chat.acall("and now?"))
    assert [a["name"] for a in waiting.value.approvals] == ["save"]
    assert [name for name, _ in tools_ran] == ["look_up", "look_up"]


@dataclasses.dataclass
class Loop:
    next: "Loop"


def test_a_type_with_no_finite_value_is_refused_with_a_code():
    @ai(lm="test")
    def loop(seed: str) -> Loop:
        """Make a loop."""

    with pytest.raises(functai.FunctAIError) as error:
        loop("a")
    assert error.value.code == "test-model-schema" and "Optional" in str(error.value)


def test_the_values_fit_their_schemas_bounds_and_formats():
    from functai._models.samples import sample

    assert sample({"type": "integer", "minimum": 5, "multipleOf": 3}) == 6
    assert sample({"type": "integer", "exclusiveMaximum": -2}) == -3
    assert sample({"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 1.5}) == 1.25
    assert sample({"type": "string", "maxLength": 2}) == "te"
    assert sample({"type": "string", "format": "email"}) == "test@example.com"
    assert sample({"type": "array", "items": {"type": "integer"}, "minItems": 3, "uniqueItems": True}) == [0, 1, 2]
    assert sample({"type": ["null", "boolean"]}) is True
    assert sample({"const": 7}) == 7
    assert sample({"allOf": [{"$ref": "#/$defs/A"}], "$defs": {"A": {"enum": ["a"]}}}) == "a"
    json.dumps(sample({"type": "object", "additionalProperties": {"type": "array", "items": {}}}))


def test_a_missing_ref_is_refused_with_a_code():
    from functai._models.samples import sample

    for schema in (
        {"$ref": "#/$defs/Gone"},
        {"allOf": [{"$ref": "#/$defs/Gone"}], "$defs": {"Here": {"type": "string"}}},
        {"$ref": "#/prefixItems/3", "prefixItems": [{"type": "string"}]},
        {"$ref": "#/properties/a/type/x", "properties": {"a": {"type": "string"}}},
    ):
        with pytest.raises(functai.FunctAIError) as error:
            sample(schema)
        ref = schema.get("$ref") or schema["allOf"][0]["$ref"]
        assert error.value.code == "test-model-schema" and repr(ref) in str(error.value)


class Measured(pydantic.BaseModel):
    half: float = pydantic.Field(gt=0.2, multiple_of=0.5)
    below: float = pydantic.Field(le=-2.2, multiple_of=0.5)
    tenth: float = pydantic.Field(ge=0.3, multiple_of=0.1)
    third: int = pydantic.Field(gt=6, multiple_of=3)
    quarters: set[Annotated[float, pydantic.Field(ge=1, multiple_of=0.25)]] = pydantic.Field(min_length=3)


def test_numbers_are_multiples_of_multiple_of_inside_the_bounds():
    from functai._models.samples import sample

    @ai(lm="test")
    def measure(what: str) -> Measured:
        """Measure."""

    value = measure("it")
    assert (value.half, value.below, value.third) == (0.5, -2.5, 9) and value.tenth == pytest.approx(0.3)
    assert value.quarters == {1.0, 1.25, 1.5}
    with pytest.raises(functai.FunctAIError) as error:
        sample({"type": "number", "multipleOf": 2, "minimum": 0.5, "maximum": 1.5})
    assert error.value.code == "test-model-schema" and "multiple of 2" in str(error.value)


FORMATTED = [
    "IPvAnyAddress", "IPvAnyInterface", "IPvAnyNetwork", "AnyUrl", "HttpUrl", "AnyHttpUrl", "EmailStr", "NameEmail",
    "UUID1", "UUID3", "UUID4", "UUID5", "UUID6", "UUID7", "UUID8", "Base64Str", "Base64Bytes", "Base64UrlStr",
    "Base64UrlBytes", "DirectoryPath", "SecretStr", "AwareDatetime", "PastDate",
]
STANDARD = [
    uuid.UUID, datetime.datetime, datetime.date, datetime.time, datetime.timedelta, pathlib.Path, bytes,
    ipaddress.IPv4Address, ipaddress.IPv6Address, ipaddress.IPv4Interface, ipaddress.IPv6Interface,
    ipaddress.IPv4Network, ipaddress.IPv6Network, zoneinfo.ZoneInfo,
]


@pytest.mark.parametrize("kind", [getattr(pydantic, name) for name in FORMATTED] + STANDARD,
                         ids=FORMATTED + [kind.__name__ for kind in STANDARD])
def test_each_format_pydantic_writes_gets_a_value_pydantic_reads(kind):
    from functai._models.samples import sample

    schema = pydantic.TypeAdapter(kind).json_schema()
    assert "format" in schema
    pydantic.TypeAdapter(kind).validate_json(json.dumps(sample(schema)))


class Host(pydantic.BaseModel):
    address: pydantic.IPvAnyAddress
    network: pydantic.IPvAnyNetwork
    key: pydantic.UUID4


def test_a_pydantic_model_with_formatted_fields_comes_back_read():
    @ai(lm="test")
    def host(name: str) -> Host:
        """The host's addresses."""

    value, record = host.run("db")
    assert str(value.address) == "127.0.0.1" and str(value.network) == "127.0.0.0/8" and value.key.version == 4
    assert record.attempts == 1


def test_the_test_model_is_no_scripted_model_and_has_no_script_or_requests():
    from functai.testing import ScriptedLM

    model = TestModel(delay=0, chunk=2)
    assert not isinstance(model, ScriptedLM) and not hasattr(model, "requests") and not hasattr(model, "_reply")
    with pytest.raises(TypeError, match=r"TestModel\(chunk=...\)"):
        TestModel(chunk=0)
    with pytest.raises(TypeError, match=r"ScriptedLM\(delay=...\)"):
        ScriptedLM(["x"], delay=-1)

    @ai(client=model)
    def shout(text: str) -> str:
        """Shout it."""

    with shout.stream("hi") as stream:
        assert [event.text for event in stream if event.kind == "text"] == ["te", "st"]
