"""Change: every field checked when made; per-hook fields checked when folded."""

import pytest

from functai import Change, PluginError


def _refused(field, **kwargs):
    with pytest.raises(PluginError) as info:
        Change(**kwargs)
    assert info.value.code == "plugin-change"
    assert info.value.field == field
    return info.value


def test_unset_fields_change_nothing():
    assert Change().fields_set() == ()
    assert Change().to_data() == {}
    assert Change(sections=["", "  "]).fields_set() == ()


def test_sections_refuse_a_bare_string_and_drop_blanks():
    assert "wrap it in a list" in _refused("sections", sections="Answer carefully.").message
    assert Change(sections=["a", " ", "b"]).sections == ("a", "b")
    _refused("sections", sections=["ok", 3])


@pytest.mark.parametrize("field", ["instruction", "lm", "block"])
def test_text_fields_must_be_non_empty_strings(field):
    _refused(field, **{field: ""})
    _refused(field, **{field: 5})


def test_output_may_be_empty_text_but_must_be_text():
    assert Change(output="").output == ""
    _refused("output", output=3)


def test_settings_unknown_key_refuses_and_lists_the_known():
    error = _refused("settings", settings={"temprature": 0})
    assert "temprature" in error.message and "temperature" in error.message
    assert Change(settings={"temperature": 0, "seed": 1}).settings == {"temperature": 0, "seed": 1}
    _refused("settings", settings=[("temperature", 0)])


def test_names_lists():
    assert Change(tools=["a"]).tools == ("a",)
    _refused("tools", tools="a")
    _refused("keep", keep="t1")
    assert Change(keep=[]).keep == ()


def test_without_is_a_list_or_a_map_of_lists():
    assert Change(without=["notes"]).without == ("notes",)
    assert Change(without={"t1": ["notes"]}).without == {"t1": ("notes",)}
    _refused("without", without="notes")
    _refused("without", without={"t1": "notes"})


def test_inputs_is_a_dict_by_name():
    assert Change(inputs={"to": "x"}).inputs == {"to": "x"}
    _refused("inputs", inputs=["to"])


def test_change_is_frozen_data():
    import attrs

    change = Change(sections=["a"], lm="m", settings={"temperature": 0.5})
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        change.lm = "other"
    assert change.to_data() == {"sections": ["a"], "lm": "m", "settings": {"temperature": 0.5}}
    assert change == Change(sections=["a"], lm="m", settings={"temperature": 0.5})


def test_a_blank_section_does_not_hide_a_wrong_item():
    _refused("sections", sections=[" ", 5])


# --- Change as an attrs class: eq, hash, repr, evolve, asdict, frozen, signature ---

import inspect

import attrs


@attrs.frozen
class _Reference:
    """What attrs itself generates for Change's fields (no checks): eq, hash, repr, evolve, asdict."""

    instruction: object = None
    sections: object = None
    lm: object = None
    settings: object = None
    tools: object = None
    keep: object = None
    without: object = None
    inputs: object = None
    block: object = None
    output: object = None
    retry: object = None
    reply: object = None
    hold: object = None
    text: object = None
    stop: object = None
    decision: object = None
    note: object = None


_CASES = [
    {},
    {"sections": ["a"]},
    {"sections": ("a", "b")},
    {"sections": ["a", " ", "b"]},
    {"sections": ["", "  "]},
    {"sections": []},
    {"sections": "bare"},
    {"sections": ["ok", 3]},
    {"sections": [b"bytes"]},
    {"sections": iter(["a"])},
    {"sections": None},
    {"instruction": "Do it.", "sections": ["a"]},
    {"sections": ["a"], "lm": "m", "settings": {"temperature": 0.5}},
    {"tools": ["t"], "keep": [], "without": {"t1": ["x"]}, "inputs": {"a": 1}, "block": "no", "output": ""},
    {"retry": 2.5, "note": "why"},
    {"retry": True, "output": "advice"},
    {"retry": False},
    {"note": ""},
    {"hold": True, "text": "[secret]"},
    {"hold": False, "text": ""},
    {"stop": "a key was about to be shown", "note": "canary"},
    {"decision": "checked", "note": "$0.01 of $5.00"},
    {"decision": ""},
    {"decision": "x" * 41},
    {"decision": 3},
    {"settings": {}},
    {"lm": ""},
    {"nonsense": 1},
    {"sections": ["a"], "nonsense": 1},
]


def _made(make, kwargs):
    try:
        return ("made", make(**kwargs))
    except Exception as error:  # noqa: BLE001 - the error itself is compared
        return ("raised", type(error), str(error), getattr(error, "code", None), getattr(error, "field", None))


@pytest.mark.parametrize("kwargs", [c for c in _CASES if _made(Change, dict(c))[0] == "made"])
def test_change_behaves_as_an_attrs_class_with_its_fields(kwargs):
    made = Change(**kwargs)
    values = {field.name: getattr(made, field.name) for field in attrs.fields(Change)}
    reference = _Reference(**values)
    assert [f.name for f in attrs.fields(Change)] == [f.name for f in attrs.fields(_Reference)]
    assert repr(made) == repr(reference).replace("_Reference(", "Change(")
    assert attrs.asdict(made) == attrs.asdict(reference)
    assert attrs.astuple(made) == attrs.astuple(reference)
    assert (made == Change(**kwargs)) is (reference == _Reference(**values))
    try:
        expected_hash: object = hash(reference)
    except TypeError:
        expected_hash = TypeError
    if expected_hash is TypeError:
        with pytest.raises(TypeError):
            hash(made)
    else:
        assert hash(made) == hash(Change(**kwargs))
    evolved = attrs.evolve(made, lm="other")
    assert evolved.lm == "other" and evolved.sections == made.sections
    assert attrs.evolve(made) == made
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made.sections = ("x",)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        del made.lm


def test_change_keeps_its_keyword_only_signature():
    params = inspect.signature(Change).parameters
    assert list(params) == [f.name for f in attrs.fields(Change)]
    assert all(p.kind is p.KEYWORD_ONLY and p.default is None for p in params.values())
    with pytest.raises(TypeError, match="positional"):
        Change(["a"])  # type: ignore[misc]
    with pytest.raises(TypeError, match="unexpected keyword argument 'section'"):
        Change(section=["a"])  # type: ignore[call-arg]
