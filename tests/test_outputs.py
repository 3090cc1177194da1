"""Output types: their JSON schemas, reading replies strictly, and call-record data.

This module uses ``from __future__ import annotations`` on purpose: every
dataclass/attrs class below has string annotations that the reader must
resolve with ``typing.get_type_hints``.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any, Dict, Generic, List, Literal, Optional, Tuple, TypeVar, Union

import attrs
import pytest

from functai._calls.outputs import readers
from functai._calls.outputs import describe, output_schema, read_output, to_jsonable
from functai._errors import FunctAIError, OutputError


# --------------------------------------------------------------------------- types under test


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Item:
    name: str
    size: int = 0
    tags: list[str] = dataclasses.field(default_factory=list)


@attrs.define
class Crate:
    items: list[Item]
    color: Color
    label: Optional[str] = None
    weights: dict[str, float] = attrs.field(factory=dict)


@dataclasses.dataclass
class Shipment:
    crates: list[Crate]
    kind: Literal["air", "sea"]


@dataclasses.dataclass
class Node:
    value: int
    children: list[Node] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Forest:
    trees: list[Node]


@dataclasses.dataclass
class Positive:
    n: int

    def __post_init__(self) -> None:
        if self.n <= 0:
            raise ValueError("n must be positive")


@attrs.define
class Private:
    _secret: str
    shown: int = attrs.field(default=1, validator=attrs.validators.gt(0))
    derived: int = attrs.field(init=False, default=7)


T = TypeVar("T")


@dataclasses.dataclass
class Boxed(Generic[T]):
    value: T
    many: list[T] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Described:
    answer: str = dataclasses.field(metadata={"description": "the answer itself"})


class Plain:
    pass


@dataclasses.dataclass
class HasPlain:
    ok: int
    bad: Plain


def fails(text: str, tp: Any) -> str:
    """Read expecting failure; return the message a model would see."""
    with pytest.raises(OutputError) as info:
        read_output(text, tp)
    assert info.value.reply == text
    assert info.value.code == "output-invalid"
    assert isinstance(info.value, FunctAIError)
    return info.value.message


# --------------------------------------------------------------------------- schemas


def test_str_has_no_schema_and_is_returned_verbatim() -> None:
    assert output_schema(str) is None
    text = '  ```json\n{"a": 1}\n```  '
    assert read_output(text, str) is text


@pytest.mark.parametrize(
    ("tp", "schema"),
    [
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (type(None), {"type": "null"}),
        (None, {"type": "null"}),
        (Any, {}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (List[str], {"type": "array", "items": {"type": "string"}}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (
            tuple[int, str],
            {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "items": False,
                "minItems": 2,
                "maxItems": 2,
            },
        ),
        (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (Dict[str, Any], {"type": "object", "additionalProperties": {}}),
        (Literal["a", "b", 3, True], {"enum": ["a", "b", 3, True]}),
        (Color, {"enum": ["red", "green"]}),
        (Level, {"enum": [1, 2]}),
        (Optional[int], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (int | None, {"anyOf": [{"type": "integer"}, {"type": "null"}]}),
        (Union[int, str], {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
    ],
)
def test_schema_of_simple_types(tp: Any, schema: dict) -> None:
    assert output_schema(tp) == schema


def test_schema_of_nested_classes_is_inline() -> None:
    item = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "size": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["name"],
        "additionalProperties": False,
        "title": "Item",
    }
    crate = {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": item},
            "color": {"enum": ["red", "green"]},
            "label": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "weights": {"type": "object", "additionalProperties": {"type": "number"}},
        },
        "required": ["items", "color"],
        "additionalProperties": False,
        "title": "Crate",
    }
    assert output_schema(Shipment) == {
        "type": "object",
        "properties": {
            "crates": {"type": "array", "items": crate},
            "kind": {"enum": ["air", "sea"]},
        },
        "required": ["crates", "kind"],
        "additionalProperties": False,
        "title": "Shipment",
    }


def test_schema_is_cached_per_type() -> None:
    first = output_schema(list[Item])
    assert output_schema(list[Item]) is first
    assert output_schema(Shipment) is output_schema(Shipment)


def test_schema_leaves_out_init_false_and_keeps_field_descriptions() -> None:
    assert output_schema(Private) == {
        "type": "object",
        "properties": {"_secret": {"type": "string"}, "shown": {"type": "integer"}},
        "required": ["_secret"],
        "additionalProperties": False,
        "title": "Private",
    }
    assert output_schema(Described)["properties"]["answer"] == {
        "type": "string",
        "description": "the answer itself",
    }


def test_recursive_class_schema_uses_refs() -> None:
    node = {
        "type": "object",
        "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#"}}},
        "required": ["value"],
        "additionalProperties": False,
        "title": "Node",
    }
    assert output_schema(Node) == node
    schema = output_schema(Forest)
    ref = {"$ref": "#/$defs/Node"}
    assert schema["properties"]["trees"] == {"type": "array", "items": ref}
    assert schema["$defs"]["Node"]["properties"]["children"] == {"type": "array", "items": ref}


def test_generic_dataclass_alias_substitutes_type_variables() -> None:
    schema = output_schema(Boxed[int])
    assert schema["title"] == "Boxed[int]"
    assert schema["properties"] == {
        "value": {"type": "integer"},
        "many": {"type": "array", "items": {"type": "integer"}},
    }
    assert read_output('{"value": 3, "many": [1, 2]}', Boxed[int]) == Boxed(3, [1, 2])
    assert fails('{"value": "3"}', Boxed[int]) == 'expected an integer at $.value, got "3"'


# --------------------------------------------------------------------------- unsupported types


@pytest.mark.parametrize(
    ("tp", "fragment"),
    [
        (Plain, "Plain cannot be an output type"),
        (complex, "complex cannot be an output type"),
        (dict[int, str], "JSON object keys are strings"),
        (Dict[Color, int], "JSON object keys are strings"),
        (set[list[int]], "set items must be hashable"),
        (set[Item], "set items must be hashable"),
        (list[Plain], "Plain cannot be an output type"),
        ("Item", "string annotation that was never resolved"),
    ],
)
def test_unsupported_types_raise_type_error(tp: Any, fragment: str) -> None:
    with pytest.raises(TypeError) as info:
        output_schema(tp)
    assert fragment in str(info.value)
    with pytest.raises(TypeError):
        read_output("{}", tp)


def test_unsupported_field_names_where_it_is() -> None:
    with pytest.raises(TypeError) as info:
        output_schema(list[HasPlain])
    assert str(info.value).startswith("Plain cannot be an output type")
    assert "field 'bad' of HasPlain" in str(info.value)


def test_unresolvable_annotation_is_a_clear_type_error() -> None:
    @dataclasses.dataclass
    class Local:
        inner: Missing  # noqa: F821 - deliberately unknown

    with pytest.raises(TypeError, match=r"Local cannot be an output type: its annotations cannot be resolved .*Missing"):
        output_schema(Local)


def test_enum_with_non_json_values_is_rejected() -> None:
    class Weird(enum.Enum):
        A = (1, 2)

    with pytest.raises(TypeError, match="member A has value"):
        output_schema(Weird)


# --------------------------------------------------------------------------- scalars


def test_scalars_good() -> None:
    assert read_output("42", int) == 42
    assert read_output(" 2.5 ", float) == 2.5
    assert read_output("true", bool) is True
    assert read_output("null", None) is None
    assert read_output('"hi"', Optional[str]) == "hi"


def test_int_is_accepted_for_float_and_converted() -> None:
    value = read_output("3", float)
    assert value == 3.0 and type(value) is float
    assert read_output("[1, 2.5]", list[float]) == [1.0, 2.5]
    assert [type(v) for v in read_output("[1, 2.5]", list[float])] == [float, float]


@pytest.mark.parametrize(
    ("text", "tp", "message"),
    [
        ('"three"', int, 'expected an integer at $, got "three"'),
        ("3.0", int, "expected an integer at $, got 3.0"),
        ("true", int, "expected an integer at $, got true"),
        ("false", float, "expected a number at $, got false"),
        ("1", bool, "expected true or false at $, got 1"),
        ('"true"', bool, 'expected true or false at $, got "true"'),
        ("5", str | None, "expected str | None at $, got 5"),
        ("0", None, "expected null at $, got 0"),
    ],
)
def test_scalars_are_strict(text: str, tp: Any, message: str) -> None:
    assert fails(text, tp) == message


def test_not_json_and_empty_reply() -> None:
    assert fails("three", int) == "the reply is not JSON: Expecting value at line 1 column 1"
    assert fails('{"a": 1', dict[str, int]).startswith("the reply is not JSON: ")
    assert fails("   ", int) == "the reply is empty; expected JSON"
    assert fails("1 2", int).startswith("the reply is not JSON: Extra data")


def test_missing_text() -> None:
    with pytest.raises(OutputError, match="the reply has no text"):
        read_output(None, int)  # type: ignore[arg-type]
    with pytest.raises(OutputError, match="the reply has no text"):
        read_output(None, str)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- code fences


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "a"}',
        '\n  {"name": "a"}  \n',
        '```json\n{"name": "a"}\n```',
        '```\n{"name": "a"}\n```',
        '  ```JSON\n  {"name": "a"}\n```\n',
        '```{"name": "a"}```',
    ],
)
def test_fences_and_whitespace_are_tolerated(text: str) -> None:
    assert read_output(text, Item) == Item("a")


def test_only_one_surrounding_fence_is_removed() -> None:
    assert fails('Here you go:\n```json\n{"name": "a"}\n```', Item).startswith("the reply is not JSON")
    assert fails('```json\n```json\n{"name": "a"}\n```\n```', Item).startswith("the reply is not JSON")


# --------------------------------------------------------------------------- containers


def test_lists_tuples_sets_dicts() -> None:
    assert read_output("[1, 2]", list[int]) == [1, 2]
    assert read_output('["a"]', List[str]) == ["a"]
    assert read_output("[1, 2, 3]", tuple[int, ...]) == (1, 2, 3)
    assert read_output('[1, "x"]', tuple[int, str]) == (1, "x")
    assert read_output('[1, "x"]', Tuple[int, str]) == (1, "x")
    assert read_output("[3, 1, 3]", set[int]) == {1, 3}
    assert read_output('{"a": [1], "b": []}', dict[str, list[int]]) == {"a": [1], "b": []}
    assert read_output('{"x": {"y": 1}}', dict) == {"x": {"y": 1}}
    assert read_output('[1, "a", null, {"b": [true]}]', list[Any]) == [1, "a", None, {"b": [True]}]
    assert read_output('{"k": [1, {"z": null}]}', Any) == {"k": [1, {"z": None}]}


@pytest.mark.parametrize(
    ("text", "tp", "message"),
    [
        ('{"a": 1}', list[int], 'expected an array at $, got {"a": 1}'),
        ('[1, 2, "x"]', list[int], 'expected an integer at $[2], got "x"'),
        ("[1]", tuple[int, str], "expected an array of 2 items at $, got 1 item"),
        ("[1, 2]", tuple[int, str], "expected a string at $[1], got 2"),
        ('[[1], [2, "z"]]', list[list[int]], 'expected an integer at $[1][1], got "z"'),
        ('{"a": 1, "b": "2"}', dict[str, int], 'expected an integer at $.b, got "2"'),
        ('{"two words": true}', dict[str, int], 'expected an integer at $["two words"], got true'),
        ("[1, 2]", dict[str, int], "expected an object at $, got [1, 2]"),
        ('["a", 1]', set[str], "expected a string at $[1], got 1"),
    ],
)
def test_container_errors_have_paths(text: str, tp: Any, message: str) -> None:
    assert fails(text, tp) == message


def test_long_values_are_shortened_in_messages() -> None:
    message = fails(json.dumps("x" * 500), int)
    assert message.startswith('expected an integer at $, got "xxx')
    assert message.endswith("...")
    assert len(message) < 100


# --------------------------------------------------------------------------- Literal and Enum


def test_literal() -> None:
    assert read_output('"a"', Literal["a", "b"]) == "a"
    assert read_output("2", Literal[1, 2]) == 2
    assert read_output("true", Literal[True, 1]) is True
    assert fails('"c"', Literal["a", "b"]) == 'expected one of "a", "b" at $, got "c"'
    # bool and int are different values even though True == 1 in Python.
    assert fails("true", Literal[1, 2]) == "expected one of 1, 2 at $, got true"
    assert fails("1", Literal[True]) == "expected one of true at $, got 1"


def test_enum_by_value_then_by_name() -> None:
    assert read_output('"red"', Color) is Color.RED
    assert read_output('"GREEN"', Color) is Color.GREEN  # a name, since no value matched
    assert read_output("2", Level) is Level.HIGH
    assert read_output('"LOW"', Level) is Level.LOW
    assert fails('"blue"', Color) == 'expected one of "red", "green" at $, got "blue"'
    assert fails("true", Level) == "expected one of 1, 2 at $, got true"
    assert fails("1.0", Level) == "expected one of 1, 2 at $, got 1.0"


# --------------------------------------------------------------------------- unions


def test_optional_and_union_first_fit() -> None:
    assert read_output("null", Optional[Item]) is None
    assert read_output('{"name": "n"}', Item | None) == Item("n")
    assert read_output("3", Union[int, str]) == 3
    assert read_output('"3"', Union[int, str]) == "3"
    # first member that fits wins: 3 fits float, so it becomes 3.0
    value = read_output("3", Union[float, int])
    assert value == 3.0 and type(value) is float
    assert read_output("true", Union[int, bool]) is True


def test_union_error_reports_the_member_that_almost_fitted() -> None:
    # Only Item could take an object, so its specific complaint is the useful one.
    assert fails('{"size": 1}', Optional[Item]) == 'missing required field "name" at $'
    assert fails('[1, "x"]', Optional[list[int]]) == 'expected an integer at $[1], got "x"'
    assert fails('{"v": "x"}', Union[int, dict[str, int]]) == 'expected an integer at $.v, got "x"'


def test_union_error_when_no_member_applies_or_several_do() -> None:
    assert fails("[1]", Union[int, str]) == "expected int | str at $, got [1]"
    message = fails('{"q": 1}', Union[Item, Positive])
    assert message == (
        'expected Item | Positive at $ ('
        'as Item: missing required field "name" and unexpected field "q" at $ (fields of Item: "name", "size", "tags"); '
        'as Positive: missing required field "n" and unexpected field "q" at $ (fields of Positive: "n"))'
    )


# --------------------------------------------------------------------------- classes


def test_nested_dataclass_inside_attrs_inside_list() -> None:
    text = json.dumps(
        {
            "crates": [
                {"items": [{"name": "a"}, {"name": "b", "size": 2, "tags": ["x"]}], "color": "red"},
                {"items": [], "color": "green", "label": "empty", "weights": {"w": 1}},
            ],
            "kind": "sea",
        }
    )
    shipment = read_output(text, Shipment)
    assert shipment == Shipment(
        crates=[
            Crate(items=[Item("a"), Item("b", 2, ["x"])], color=Color.RED),
            Crate(items=[], color=Color.GREEN, label="empty", weights={"w": 1.0}),
        ],
        kind="sea",
    )
    assert type(shipment.crates[1].weights["w"]) is float
    assert shipment.crates[0].label is None


def test_defaults_and_default_factories_are_fresh() -> None:
    one = read_output('{"name": "a"}', Item)
    two = read_output('{"name": "b"}', Item)
    assert one.size == 0 and one.tags == [] and one.tags is not two.tags
    crate = read_output('{"items": [], "color": "red"}', Crate)
    assert crate.weights == {} and crate.label is None


def test_deep_error_path() -> None:
    base = {"kind": "air", "crates": [{"color": "red", "items": [{"name": "a"}, {"name": "b"}, {"name": 5}]}]}
    assert fails(json.dumps(base), Shipment) == "expected a string at $.crates[0].items[2].name, got 5"


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"size": 1}, 'missing required field "name" at $'),
        ({"name": "a", "colour": 1}, 'unexpected field "colour" at $ (fields of Item: "name", "size", "tags")'),
        (
            {"nam": "a", "sise": 1},
            'missing required field "name" and unexpected fields "nam", "sise" at $ (fields of Item: "name", "size", "tags")',
        ),
        ({"name": "a", "tags": "x"}, 'expected an array at $.tags, got "x"'),
        (["name"], 'expected an object (Item) at $, got ["name"]'),
    ],
)
def test_dataclass_field_errors(payload: Any, message: str) -> None:
    assert fails(json.dumps(payload), Item) == message


def test_attrs_missing_fields_are_all_named() -> None:
    assert fails("{}", Crate) == 'missing required fields "items", "color" at $'
    assert fails('{"items": [], "color": "blue"}', Crate) == 'expected one of "red", "green" at $.color, got "blue"'


def test_attrs_private_field_uses_its_name_as_key_and_alias_for_init() -> None:
    value = read_output('{"_secret": "s"}', Private)
    assert value._secret == "s" and value.shown == 1 and value.derived == 7
    assert fails('{"secret": "s"}', Private).startswith('missing required field "_secret" and unexpected field "secret"')
    # init=False fields are not input
    assert fails('{"_secret": "s", "derived": 1}', Private).startswith('unexpected field "derived" at $')


def test_constructor_validation_becomes_an_output_error() -> None:
    assert read_output('{"n": 2}', Positive) == Positive(2)
    assert fails('{"n": 0}', Positive) == "invalid Positive at $: n must be positive"
    assert fails('[{"n": 1}, {"n": -1}]', list[Positive]) == "invalid Positive at $[1]: n must be positive"
    assert fails('{"_secret": "s", "shown": 0}', Private).startswith("invalid Private at $: ")


def test_recursive_dataclass_reads() -> None:
    tree = read_output('{"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]}', Node)
    assert tree == Node(1, [Node(2, [Node(3)])])
    assert fails('{"value": 1, "children": [{"value": 2, "children": [{"value": "x"}]}]}', Node) == (
        'expected an integer at $.children[0].children[0].value, got "x"'
    )
    assert read_output('{"trees": [{"value": 4}]}', Forest) == Forest([Node(4)])


# --------------------------------------------------------------------------- pydantic


def test_pydantic_model() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Point(pydantic.BaseModel):
        x: int
        y: int = 0

    class Path(pydantic.BaseModel):
        points: list[Point]

    assert output_schema(Point) == Point.model_json_schema()
    assert read_output('```json\n{"x": 1}\n```', Point) == Point(x=1, y=0)
    assert fails('{"y": 1}', Point) == 'missing required field "x" at $'
    assert fails("{", Point).startswith("the reply is not JSON: ")
    assert fails('{"points": [{"x": 1}, {"x": [1]}]}', Path) == "Input should be a valid integer at $.points[1].x, got [1]"

    # Nested in plain types: the model's $defs move to the root so refs still resolve.
    schema = output_schema(list[Path])
    assert schema["items"]["properties"]["points"]["items"] == {"$ref": "#/$defs/Point"}
    assert schema["$defs"]["Point"]["properties"]["x"] == {"title": "X", "type": "integer"}
    assert read_output('[{"points": [{"x": 2}]}]', list[Path]) == [Path(points=[Point(x=2)])]
    assert fails('[{"points": [{"x": 2, "y": "q"}]}]', list[Path]).endswith('at $[0].points[0].y, got "q"')

    assert to_jsonable(Path(points=[Point(x=1)])) == {"points": [{"x": 1, "y": 0}]}


def test_pydantic_is_not_imported_by_the_module() -> None:
    import subprocess
    import sys

    code = (
        "import sys, functai._calls.outputs as o, dataclasses\n"
        "@dataclasses.dataclass\nclass A:\n    x: int\n"
        "o.output_schema(A); o.read_output('{\"x\": 1}', A); o.to_jsonable(A(1))\n"
        "print('pydantic' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- to_jsonable


def test_to_jsonable_round_trip() -> None:
    data = {
        "crates": [
            {"items": [{"name": "a", "size": 1, "tags": ["t"]}], "color": "green", "label": None, "weights": {"w": 0.5}},
        ],
        "kind": "air",
    }
    value = read_output(json.dumps(data), Shipment)
    assert to_jsonable(value) == data
    assert read_output(json.dumps(to_jsonable(value)), Shipment) == value


def test_to_jsonable_conversions() -> None:
    class Opaque:
        def __repr__(self) -> str:
            return "<opaque>"

    assert to_jsonable((1, [2, (3,)])) == [1, [2, [3]]]
    assert to_jsonable({3, 1, 2}) == [1, 2, 3]
    assert to_jsonable(frozenset({"b", "a"})) == ["a", "b"]
    assert to_jsonable({1: "a", Color.RED: "b", None: "c"}) == {"1": "a", "red": "b", "None": "c"}
    assert to_jsonable(Level.HIGH) == 2 and type(to_jsonable(Level.HIGH)) is int
    assert to_jsonable(Color.GREEN) == "green"
    assert to_jsonable(Opaque()) == "<opaque>"
    assert to_jsonable({"o": [Opaque()]}) == {"o": ["<opaque>"]}
    assert to_jsonable(b"x") == "b'x'"
    assert to_jsonable(Private("s")) == {"_secret": "s", "shown": 1, "derived": 7}
    assert to_jsonable(Node(1, [Node(2)])) == {"value": 1, "children": [{"value": 2, "children": []}]}
    assert to_jsonable(Boxed((1, 2))) == {"value": [1, 2], "many": []}
    json.dumps(to_jsonable({"x": {Color.RED, Color.GREEN}, "y": Opaque()}))  # always serialisable


def test_to_jsonable_survives_cycles() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    result = to_jsonable(loop)
    assert result[0] == 1 and isinstance(result[1], str)
    json.dumps(result)


# --------------------------------------------------------------------------- describe


@pytest.mark.parametrize(
    ("tp", "name"),
    [
        (int, "int"),
        (None, "None"),
        (type(None), "None"),
        (Any, "Any"),
        (list[str], "list[str]"),
        (List[str], "list[str]"),
        (dict[str, list[int]], "dict[str, list[int]]"),
        (tuple[int, ...], "tuple[int, ...]"),
        (tuple[()], "tuple[()]"),
        (Optional[int], "int | None"),
        (Union[int, str], "int | str"),
        (Literal["a", "b"], 'Literal["a", "b"]'),
        (Literal[1, True, None], "Literal[1, True, None]"),
        (Item, "Item"),
        (Boxed[int], "Boxed[int]"),
    ],
)
def test_describe(tp: Any, name: str) -> None:
    assert describe(tp) == name


# --------------------------------------------------------------------------- caching


def test_reader_is_built_once_per_type(monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclasses.dataclass
    class Fresh:
        a: int

    built: list[Any] = []
    real = readers._build_reader

    def counting(tp: Any) -> Any:
        built.append(tp)
        return real(tp)

    monkeypatch.setattr(readers, "_build_reader", counting)
    output_schema(list[Fresh])  # decoration time builds everything
    count = len(built)
    assert count >= 1
    for _ in range(3):
        assert read_output('[{"a": 1}]', list[Fresh]) == [Fresh(1)]
    assert len(built) == count


def test_empty_tuple_and_unhashable_annotation() -> None:
    from typing import Annotated

    assert read_output("[]", tuple[()]) == ()
    assert fails("[1]", tuple[()]) == "expected an array of 0 items at $, got 1 item"
    tp = Annotated[int, {"unhashable": []}]
    assert output_schema(tp) == {"type": "integer"}
    assert read_output("5", tp) == 5
