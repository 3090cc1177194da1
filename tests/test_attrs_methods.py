"""The attrs classes whose methods are written out by hand behave as attrs would generate them.

Each class is compared with a reference that attrs builds from the same fields
(``attrs.fields`` of the class: defaults, factories, converters, keyword-only)
and the same class options, generating every method: construction (positional,
keyword, defaults, factories, converters, the errors of wrong calls), repr
(a cycle shows ``...``), equality, hashing, immutability, ``attrs.evolve`` /
``asdict`` / ``astuple``, pickling and the signature. A field added to a class
without its hand-written methods following fails here.
"""

from __future__ import annotations

import copy
import inspect
import pickle
from typing import Any

import attrs
import pytest

from functai import CallRecord, Reply, Request, Template, ToolCall

#: class → (class options attrs generated before, sample calls: (args, kwargs) each).
CASES: dict[type, tuple[dict[str, Any], list[tuple[tuple[Any, ...], dict[str, Any]]]]] = {
    Request: (
        {"frozen": True, "eq": True},
        [
            (("gpt", [{"role": "user", "content": "hi"}]), {}),
            (("gpt", ({"role": "system", "content": "s"}, {"role": "user", "content": "u"})),
             {"tools": [{"name": "t", "description": "d", "parameters": {}}], "settings": {"temperature": 0.5},
              "output_schema": {"type": "object"}}),
            ((), {"model": "m", "messages": [], "settings": {}}),
            (("m", [{"role": "assistant", "content": None, "tool_calls": [{"id": "1", "name": "t", "input": {}}]}]),
             {}),
        ],
    ),
    Reply: (
        {"frozen": True, "eq": True},
        [
            ((), {}),
            (("text",), {}),
            (("a", [ToolCall("1", "t", {"x": 1})], {"input_tokens": 3}, "stop", None, "thought"), {}),
            ((), {"tool_calls": (), "usage": {}, "refusal": "no"}),
            ((), {"usage": [("input_tokens", 1)]}),
            (("a",), {"id": "chatcmpl-1", "model": "gpt-x"}),
        ],
    ),
    ToolCall: (
        {"frozen": True, "eq": True},
        [(("1", "t"), {}), (("1", "t", {"a": 1}), {}), ((), {"id": "2", "name": "u", "input": [("k", "v")]})],
    ),
    Template: (
        {"frozen": True, "eq": True},
        [((), {"user": "{x}"}), ((), {"system": "{instruction}", "user": "{x} {y}"})],
    ),
    CallRecord: (
        {"frozen": False, "eq": False},
        [
            (("id", "f", "v", {"a": 1}, "2024-01-01"), {}),
            ((), {"id": "i", "function": "f", "version": "v", "inputs": {}, "started": "s", "parent": "p",
                  "output": [1, 2], "error": {"code": "x"}, "settings": {"t": 1}, "usage": {"input_tokens": 1},
                  "tool_calls": [{"name": "t"}], "changes": [{"plugin": "p"}], "sections": ["s"],
                  "replayable": False, "attempts": 2, "heard": [{"plugin": "h"}], "rating": {"score": 1}}),
        ],
    ),
}

#: Calls each class must refuse, as its generated ``__init__`` refuses them.
BAD_CALLS: dict[type, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {
    Request: [((), {}), (("m",), {}), (("m", [], (), {}, None, "extra"), {}), (("m", []), {"nope": 1}),
              (("m", []), {"settings": None}), (("m", [1]), {})],
    Reply: [((), {"tool_calls": [1]}), ((), {"usage": None}), ((None, (), {}, None, None, None, "i", "m", "x"), {}),
            ((), {"text": "a", "nope": 1})],
    ToolCall: [((), {}), (("1",), {}), (("1", "t", None), {}), (("1", "t"), {"x": 1})],
    Template: [((), {}), (("u",), {}), ((), {"system": "s"}), ((), {"user": "u", "other": 1})],
    CallRecord: [((), {}), (("i", "f", "v", {}), {}), (("i", "f", "v", {}, "s"), {"nope": 1}),
                 (tuple(range(26)), {})],
}


def reference(cls: type) -> type:
    """The class attrs generates from ``cls``'s fields, with every method generated."""
    options, _ = CASES[cls]
    fields = {
        a.name: attrs.field(default=a.default, converter=a.converter, kw_only=a.kw_only, eq=a.eq, order=a.order,
                            hash=a.hash, init=a.init, repr=a.repr, alias=a.alias, type=a.type)
        for a in attrs.fields(cls)
    }
    made = attrs.make_class(cls.__name__, fields, slots=True, frozen=options["frozen"], eq=options["eq"],
                            order=False, weakref_slot=True)
    made.__qualname__ = cls.__qualname__
    return made


def values(obj: Any) -> list[tuple[str, Any, type]]:
    return [(a.name, getattr(obj, a.name), type(getattr(obj, a.name))) for a in attrs.fields(type(obj))]


def outcome(call: Any) -> tuple[str, Any]:
    try:
        return "ok", call()
    except Exception as error:  # the same exception, same message
        return type(error).__name__, str(error).replace("Reference", "")


@pytest.mark.parametrize("cls", list(CASES), ids=lambda c: c.__name__)
def test_fields_and_signature_match(cls):
    ref = reference(cls)
    assert attrs.has(cls)
    assert [(a.name, a.default, a.kw_only, a.init, a.eq, a.alias) for a in attrs.fields(cls)] == [
        (a.name, a.default, a.kw_only, a.init, a.eq, a.alias) for a in attrs.fields(ref)]
    mine, theirs = inspect.signature(cls).parameters, inspect.signature(ref).parameters
    assert [(p.name, p.kind, p.default) for p in mine.values()] == [
        (p.name, p.kind, p.default) for p in theirs.values()]
    assert cls.__match_args__ == ref.__match_args__
    assert set(cls.__slots__) | {"__weakref__"} == set(ref.__slots__) | {"__weakref__"}


@pytest.mark.parametrize("cls", list(CASES), ids=lambda c: c.__name__)
def test_construction_repr_and_attrs_functions_match(cls):
    ref = reference(cls)
    for args, kwargs in CASES[cls][1]:
        mine, theirs = cls(*args, **kwargs), ref(*args, **kwargs)
        assert values(mine) == values(theirs)
        assert repr(mine) == repr(theirs)
        assert attrs.asdict(mine) == attrs.asdict(theirs)
        assert attrs.astuple(mine) == attrs.astuple(theirs)
        first = attrs.fields(cls)[0].name
        assert values(attrs.evolve(mine, **{first: "changed"})) == values(attrs.evolve(theirs, **{first: "changed"}))
        assert mine.__getstate__() == theirs.__getstate__()  # what pickle and copy take
        pickled = outcome(lambda: values(pickle.loads(pickle.dumps(mine))))
        if pickled[0] == "ok":
            assert pickled[1] == values(mine)
        else:  # a value that does not pickle (a mappingproxy), not the class
            assert outcome(lambda: pickle.dumps([getattr(mine, a.name) for a in attrs.fields(cls)]))[0] != "ok"
        copied = outcome(lambda: values(copy.deepcopy(mine)))
        assert copied[0] == outcome(lambda: copy.deepcopy(theirs))[0]
        assert copied[0] != "ok" or copied[1] == values(mine)
        assert values(copy.copy(mine)) == values(mine)


@pytest.mark.parametrize("cls", list(CASES), ids=lambda c: c.__name__)
def test_wrong_calls_fail_the_same_way(cls):
    ref = reference(cls)
    for args, kwargs in BAD_CALLS[cls]:
        mine, theirs = outcome(lambda: cls(*args, **kwargs)), outcome(lambda: ref(*args, **kwargs))
        assert mine[0] != "ok"
        assert mine == theirs, (args, kwargs)


@pytest.mark.parametrize("cls", list(CASES), ids=lambda c: c.__name__)
def test_equality_hashing_and_immutability_match(cls):
    ref = reference(cls)
    samples = CASES[cls][1]
    for i, (args, kwargs) in enumerate(samples):
        for j, (args2, kwargs2) in enumerate(samples):
            assert (cls(*args, **kwargs) == cls(*args2, **kwargs2)) == (ref(*args, **kwargs) == ref(*args2, **kwargs2))
            assert (cls(*args, **kwargs) != cls(*args2, **kwargs2)) == (ref(*args, **kwargs) != ref(*args2, **kwargs2))
        mine, theirs = cls(*args, **kwargs), ref(*args, **kwargs)
        assert (mine == theirs) is False and (mine == object()) is False and (mine != 1) is True
        assert outcome(lambda: hash(mine) == hash(cls(*args, **kwargs)))[0] == outcome(
            lambda: hash(theirs) == hash(ref(*args, **kwargs)))[0]
        twin = cls(*args, **kwargs)
        if outcome(lambda: hash(theirs))[0] == "ok" and mine == twin:
            assert hash(mine) == hash(twin)
        first = attrs.fields(cls)[0].name
        assert outcome(lambda: setattr(mine, first, "x"))[0] == outcome(lambda: setattr(theirs, first, "x"))[0]
        assert outcome(lambda: delattr(mine, first))[0] == outcome(lambda: delattr(theirs, first))[0]


def test_a_record_inside_its_own_repr_shows_dots_as_attrs_does():
    ref = reference(CallRecord)
    mine, theirs = CallRecord("i", "f", "v", {}, "s"), ref("i", "f", "v", {}, "s")
    mine.output, theirs.output = [mine], [theirs]
    assert repr(mine) == repr(theirs)
    assert "output=[...]" in repr(mine)
