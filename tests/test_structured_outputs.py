"""Output schemas the server enforces (strict), and the fallback for servers that refuse them."""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Callable, Iterator, Literal, Optional, TypedDict

import attrs
import pydantic
import pytest
from loopback import LoopbackServer, Received, Scripted, completion, error_body

import functai
from functai import ai
from functai._calls.outputs import output_schema
from functai._errors import ModelError
from functai._models import openai as openai_client
from functai._models.wire import strict_schema, wrap_schema


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(openai_client, "_formats", {})
    with LoopbackServer() as srv:
        functai.configure(lm="openai/m", base_url=srv.url, http_retries=0)
        yield srv


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Person:
    name: str
    age: int
    nickname: Optional[str] = None  # optional: required and nullable on the wire


@attrs.define
class Pet:
    name: str
    kind: Literal["cat", "dog"]


class Address(TypedDict, total=False):
    street: str
    city: Optional[str]


class Order(pydantic.BaseModel):
    item: str
    colour: Colour
    notes: Optional[str] = None
    tags: list[str] = []


@ai
def person(text: str) -> Person:
    """The person the text is about."""


@pytest.mark.parametrize(
    "tp",
    [Person, Pet, Address, Order, Literal["a", "b"], Colour, list[Person], Optional[int], int, list[str]],
    ids=lambda tp: getattr(tp, "__name__", str(tp)),
)
def test_common_output_types_qualify_for_strict(tp) -> None:
    wrapped, _ = wrap_schema(output_schema(tp))
    strict = strict_schema(wrapped)
    assert strict is not None

    def objects(node):
        if isinstance(node, dict):
            if node.get("type") == "object" or "properties" in node:
                yield node
            for value in node.values():
                yield from objects(value)
        elif isinstance(node, list):
            for value in node:
                yield from objects(value)

    for node in objects(strict):
        assert node["additionalProperties"] is False
        assert sorted(node["required"]) == sorted(node["properties"])


@pytest.mark.parametrize("tp", [dict[str, int], tuple[int, str], set[int]], ids=str)
def test_schemas_that_cannot_be_enforced_are_sent_without_strict(tp) -> None:
    wrapped, _ = wrap_schema(output_schema(tp))
    assert strict_schema(wrapped) is None


def test_strict_true_on_the_wire_for_a_dataclass(server: LoopbackServer) -> None:
    server.reply('{"name": "Ada", "age": 36, "nickname": null}')
    assert person("Ada, 36") == Person("Ada", 36, None)
    fmt = server.requests[0].body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["required"] == ["name", "age", "nickname"] and schema["additionalProperties"] is False
    assert {"type": "null"} in schema["properties"]["nickname"]["anyOf"]


def refusing(strict: bool, loose: bool, json_object: bool = False) -> Callable[[Received], Scripted]:
    """A server that answers 400 to the response formats it does not take, as such servers do."""

    def answer(request: Received) -> Scripted:
        fmt = request.body.get("response_format") or {}
        kind = fmt.get("type")
        if kind == "json_schema" and fmt["json_schema"]["strict"] and strict:
            return Scripted(status=400, body=error_body("'strict': true is not supported"))
        if kind == "json_schema" and not fmt["json_schema"]["strict"] and loose:
            return Scripted(status=400, body=error_body("response_format json_schema is not supported"))
        if kind == "json_object" and json_object:
            return Scripted(status=400, body=error_body("response_format type json_object is not supported"))
        return Scripted(body=completion('{"name": "Ada", "age": 36, "nickname": null}'))

    return answer


def test_a_server_refusing_only_strict_gets_the_same_schema_with_strict_false(server: LoopbackServer) -> None:
    server.default = refusing(strict=True, loose=False)
    assert person("Ada, 36") == Person("Ada", 36, None)
    assert person("Ada, 36") == Person("Ada", 36, None)
    first, second, third = (r.body["response_format"] for r in server.requests)
    assert first["type"] == "json_schema" and first["json_schema"]["strict"] is True
    # The schema is still sent, as it was (every field required, no others), with strict false.
    assert second == {"type": "json_schema",
                      "json_schema": {"name": "output", "schema": first["json_schema"]["schema"], "strict": False}}
    assert third == second  # remembered for this base URL: one request per call from now on
    assert "JSON schema" not in json.dumps(server.requests[1].body["messages"])


def test_a_server_refusing_json_schema_falls_back_to_json_object_and_is_remembered(server: LoopbackServer) -> None:
    server.default = refusing(strict=True, loose=True)
    assert person("Ada, 36") == Person("Ada", 36, None)
    assert person("Ada, 36") == Person("Ada", 36, None)
    first, second, third, fourth = (r.body for r in server.requests)
    assert first["response_format"]["json_schema"]["strict"] is True
    assert second["response_format"]["json_schema"]["strict"] is False
    assert third["response_format"] == {"type": "json_object"}
    assert "JSON schema" in third["messages"][0]["content"]  # the schema is said in the instructions
    assert '"nickname"' in third["messages"][0]["content"]
    assert fourth["response_format"] == {"type": "json_object"}  # remembered for this base URL


def test_a_schema_that_cannot_be_strict_is_not_sent_twice_with_strict_false(server: LoopbackServer) -> None:
    @ai
    def counts(text: str) -> dict[str, int]:
        """Count the words."""

    server.script(
        Scripted(status=400, body=error_body("response_format json_schema is not supported")),
        Scripted(body=completion('{"a": 1}')),
    )
    assert counts("a") == {"a": 1}
    first, second = (r.body["response_format"] for r in server.requests)
    assert first["type"] == "json_schema" and first["json_schema"]["strict"] is False
    assert second == {"type": "json_object"}


def test_then_to_instructions_only(server: LoopbackServer) -> None:
    server.default = refusing(strict=True, loose=True, json_object=True)
    assert person("Ada, 36") == Person("Ada", 36, None)
    assert len(server.requests) == 4
    last = server.requests[-1].body
    assert "response_format" not in last and "JSON schema" in last["messages"][0]["content"]
    person("Bob, 7")
    assert len(server.requests) == 5 and "response_format" not in server.requests[-1].body


def test_a_400_that_no_format_cures_is_the_first_error_and_is_not_remembered(server: LoopbackServer) -> None:
    server.script(*[Scripted(status=400, body=error_body(f"model m does not exist ({n})")) for n in range(4)])
    with pytest.raises(ModelError) as info:
        person("Ada")
    assert "(0)" in info.value.message and info.value.status == 400
    assert len(server.requests) == 4
    assert openai_client._formats == {}


def test_a_str_output_sends_no_format(server: LoopbackServer) -> None:
    @ai
    def summary(text: str) -> str:
        """Summarise."""

    server.reply("short")
    assert summary("long text") == "short"
    assert "response_format" not in server.requests[0].body
    assert json.dumps(server.requests[0].body).count("JSON schema") == 0


def test_a_typeddict_output_is_strict_on_the_wire_and_read(server: LoopbackServer) -> None:
    @ai
    def address(text: str) -> Address:
        """The address in the text."""

    server.reply('{"street": "Jr. de la Union 300", "city": null}')
    assert address("...") == {"street": "Jr. de la Union 300", "city": None}
    fmt = server.requests[0].body["response_format"]["json_schema"]
    assert fmt["strict"] is True and fmt["schema"]["required"] == ["street", "city"]
