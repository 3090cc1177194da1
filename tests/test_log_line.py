"""The call log's line of a record (functai._calls.logline): the codec's line of its dict, made faster.

The line is encoded from the record's fields without building ``to_dict()``;
it must be byte for byte what ``codec.dumps(record.to_dict(), non_finite="text")``
writes, and a non-finite float anywhere in the record — however deep, next to
however many ``None``\\ s — is still written as text with a warning naming where.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import warnings

import pytest

import functai
from functai import Change, Plugin, ai, _codec as codec, tool
from functai._calls import records
from functai._calls.records import CallRecord
from functai.testing import ScriptedLM, log_events, tool_call

NAN, INF = float("nan"), float("inf")


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: float
    y: float


def record(**fields) -> CallRecord:
    base = dict(id="c1", function="f", version="v1", inputs={"a": "x"}, started="2026-01-01T00:00:00.000+00:00")
    return CallRecord(**{**base, **fields})


SHAPES = {
    "plain": {},
    "every field set": dict(
        parent="p0", path="outer/f", module="m", output="ok", error={"code": "x", "message": "m"},
        instruction="Do it.", model="scripted", settings={"temperature": 0.2, "seed": 3}, usage={"input_tokens": 4},
        finish_reason="stop", reasoning="because", seconds=0.25, conversation={"id": "c", "turn": "t", "parent": None},
        changes=[{"plugin": "p", "version": "1", "hook": "before_call", "change": {"sections": ["Be brief."]}}],
        sections=["Be brief."], replayable=False, attempts=2, heard=[{"plugin": "p", "seconds": 0.1}],
        rating={"good": True},
    ),
    "nones inside": dict(inputs={"a": None, "b": [None, 1]}, output={"k": None}, tool_calls=[{"input": {"q": None}}]),
    "text null": dict(output="null", instruction="Say null when unsure.", inputs={"null": "null"}),
    "not plain inputs": dict(inputs={"p": Point(1.5, 2.0), "c": Colour.RED, "s": {3, 1, 2}, "t": (1, 2)}),
    "keys not text": dict(inputs={1: "one", True: "yes", None: "none"}),
    "not plain output": dict(output=Point(0.5, -1.0)),
    "empty heard and no rating": dict(heard=[], rating=None, replayable=True),
    "huge integer": dict(output=2**80, usage={"input_tokens": 2**70}),
    "lone surrogate": dict(inputs={"a": "half \ud83d"}, output="\udc00"),
    "output a float": dict(output=0.5),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_a_logged_line_is_the_codecs_line_of_the_records_dict(shape, tmp_path):
    rec = record(**SHAPES[shape])
    expected = codec.dumps(rec.to_dict(), non_finite="text") + b"\n"
    folder = str(tmp_path)
    records.append(folder, rec)  # opens the log: the first line
    records.append(folder, rec)  # the log open: the path every later call takes
    assert (tmp_path / "calls.jsonl").read_bytes() == expected * 2


def test_the_changes_still_made_as_tuples_are_logged_as_their_entries(tmp_path):
    functai.configure(client=ScriptedLM(["ok", "ok"]), log_calls=str(tmp_path),
                      plugins=[Plugin("rules", before_call=lambda call: Change(sections=["Be brief."]))])

    @ai
    def echo(text: str) -> str:
        """Echo the text."""

    echo("warm")  # opens the log
    value, rec = echo.run("hi")
    line = (tmp_path / "calls.jsonl").read_bytes().splitlines()[1]
    assert line == codec.dumps(rec.to_dict())
    (entry,) = json.loads(line)["changes"]
    assert entry["plugin"] == "rules" and entry["hook"] == "before_call"
    assert entry["change"] == {"sections": ["Be brief."]}


def strict(line: bytes) -> dict:
    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")

    return json.loads(line, parse_constant=refuse)


# Each place a non-finite float can hide, with Nones around it so that counting the
# top-level Nones alone would not see it.
HIDDEN = {
    "a tool's result": (dict(tool_calls=[{"name": "t", "input": {"q": None}, "output": {"scores": [None, NAN]}}]),
                        "tool_calls[0].output.scores[1]", ["tool_calls", 0, "output", "scores", 1], "NaN"),
    "a tool's arguments": (dict(tool_calls=[{"name": "t", "input": {"x": -INF}}]),
                           "tool_calls[0].input.x", ["tool_calls", 0, "input", "x"], "-Infinity"),
    "a change's data": (dict(changes=[{"plugin": "p", "version": None, "hook": "request",
                                       "change": {"settings": {"temperature": INF}}}]),
                        "changes[0].change.settings.temperature",
                        ["changes", 0, "change", "settings", "temperature"], "Infinity"),
    "the settings": (dict(settings={"top_p": NAN}), "settings.top_p", ["settings", "top_p"], "NaN"),
    "an input below a None": (dict(inputs={"a": None, "deep": {"b": None, "c": [NAN]}}),
                              "inputs.deep.c[0]", ["inputs", "deep", "c", 0], "NaN"),
    "the output, top level": (dict(output=NAN), "output", ["output"], "NaN"),
    "a plain input": (dict(inputs={"x": NAN, "y": 1.5}), "inputs.x", ["inputs", "x"], "NaN"),
    "the error": (dict(error={"code": "x", "message": INF}), "error.message", ["error", "message"], "Infinity"),
    "a setting below another": (dict(settings={"temperature": 0.5, "extra": {"x": NAN}}), "settings.extra.x",
                                ["settings", "extra", "x"], "NaN"),
    "the seconds": (dict(seconds=INF), "seconds", ["seconds"], "Infinity"),
    "the heard timings": (dict(heard=[{"plugin": "p", "seconds": NAN}]), "heard[0].seconds",
                          ["heard", 0, "seconds"], "NaN"),
    "the conversation": (dict(conversation={"id": "c", "parent": None, "score": NAN}), "conversation.score",
                         ["conversation", "score"], "NaN"),
    "a rating": (dict(rating={"score": -INF, "by": None}), "rating.score", ["rating", "score"], "-Infinity"),
    "the usage": (dict(usage={"cost": NAN}), "usage.cost", ["usage", "cost"], "NaN"),
    "next to a text null": (dict(output="null", error={"code": "x", "message": None, "at": [NAN]}),
                            "error.at[0]", ["error", "at", 0], "NaN"),
}


@pytest.mark.parametrize("place", HIDDEN)
def test_a_non_finite_number_anywhere_in_a_record_is_logged_as_text_and_said(place, tmp_path):
    fields, where, keys, text = HIDDEN[place]
    folder = str(tmp_path)
    records.append(folder, record(output="warm"))  # the log open: the path every later call takes
    with log_events() as logged:
        records.append(folder, record(**fields))
    assert logged.named(r"non-finite number was written as text: where=(.*, )?"
                        + where.replace(".", r"\.").replace("[", r"\[").replace("]", r"\]"))
    line = strict((tmp_path / "calls.jsonl").read_bytes().splitlines()[1])
    for key in keys:
        line = line[key]
    assert line == text


def test_a_nan_in_a_tools_arguments_in_a_real_call_is_logged_as_text(tmp_path):
    @tool
    def scale(x: float, note: str | None = None) -> float:
        """Scale a number."""
        return x * 2

    @ai(tools=[scale])
    def judge(name: str) -> str:
        """Judge the name."""

    functai.configure(client=ScriptedLM(["warm", tool_call("scale", {"x": NAN, "note": None}), "fine"]),
                      log_calls=str(tmp_path))
    judge("warm-up")  # the log open: the path every later call takes
    with log_events() as logged:
        assert judge("Ada") == "fine"
    assert logged.named(r"where=tool_calls\[0\]\.input\.x")
    line = strict((tmp_path / "calls.jsonl").read_bytes().splitlines()[1])
    assert line["tool_calls"][0]["input"] == {"x": "NaN", "note": None}
    assert line["tool_calls"][0]["output"].startswith("The tool was not run: its inputs do not fit (input 'x' must "
                                                     "be float: expected a finite number at x)")


def test_a_record_without_non_finite_numbers_warns_nothing(tmp_path):
    folder = str(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for shape in SHAPES.values():
            records.append(folder, record(**shape))
            records.append(folder, record(**shape))
    assert len((tmp_path / "calls.jsonl").read_bytes().splitlines()) == 2 * len(SHAPES)


def test_a_call_record_writes_every_field_the_log_format_requires():
    """The call log's format (`functai._logfiles`, which the stores read below the records) names
    the fields a record line must have; `CallRecord` is what writes them."""
    import attrs

    from functai import _logfiles as logfiles

    assert logfiles.REQUIRED == {f.name for f in attrs.fields(CallRecord) if f.default is attrs.NOTHING}
