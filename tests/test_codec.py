"""functai._codec: the strict JSON codec records, the call log and stores write with."""

from __future__ import annotations

import dataclasses
import enum
import json
import subprocess
import sys

import pytest

from functai.testing import log_events

from functai import FunctAIError, _codec as codec


def strict(data: bytes) -> object:
    """Parse as JSON proper: NaN and Infinity refused."""
    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")

    return json.loads(data, parse_constant=refuse)


def test_writes_compact_utf8_in_insertion_order():
    data = {"b": 1, "a": [True, None, 1.5], "é": "naïve €😀"}
    out = codec.dumps(data)
    assert out == '{"b":1,"a":[true,null,1.5],"é":"naïve €😀"}'.encode()
    assert codec.loads(out) == data and list(codec.loads(out)) == ["b", "a", "é"]
    assert codec.dumps_str(data) == out.decode()


def test_integers_beyond_64_bits_are_exact_both_ways():
    big = {"n": 2**64 + 1, "m": -(2**70), "k": 123456789012345678901234567890}
    out = codec.dumps(big)
    assert strict(out) == big
    back = codec.loads(out)
    assert back == big and all(type(v) is int for v in back.values())
    assert codec.loads(json.dumps(big)) == big  # as older versions wrote it


def test_nan_and_infinity_are_never_written_and_the_error_says_where():
    record = {"output": {"scores": [1.0, float("nan")]}, "inputs": {"x": float("-inf")}, "parent": None}
    with pytest.raises(FunctAIError) as info:
        codec.dumps(record)
    assert info.value.code == "json-not-finite"
    assert "output.scores[1]" in str(info.value) and "inputs.x" in str(info.value)
    assert info.value.details["where"] == ["output.scores[1]", "inputs.x"]
    with pytest.raises(FunctAIError, match=r"at \(the value\)"):
        codec.dumps(float("inf"))
    with pytest.raises(FunctAIError, match=r"\[0\]"):
        codec.dumps([float("nan")])


def test_non_finite_as_text_writes_strict_json_and_warns_where():
    record = {"output": {"scores": [1.0, float("nan")]}, "inputs": {"big": float("inf"), "small": float("-inf")}}
    with log_events() as logged:
        out = codec.dumps(record, non_finite="text")
    assert logged.named(r"output\.scores\[1\], inputs\.big, inputs\.small")
    assert strict(out) == {"output": {"scores": [1.0, "NaN"]}, "inputs": {"big": "Infinity", "small": "-Infinity"}}
    assert record["output"]["scores"][1] != record["output"]["scores"][1]  # the caller's data is left alone


def test_nan_inside_a_dataclass_or_tuple_is_found():
    @dataclasses.dataclass
    class Point:
        x: float
        y: float

    with pytest.raises(FunctAIError, match=r"p\.y"):
        codec.dumps({"p": Point(1.0, float("nan"))})
    with log_events() as logged:
        assert strict(codec.dumps({"p": Point(1.0, float("nan")), "t": (float("inf"),)}, non_finite="text")) == {
            "p": {"x": 1.0, "y": "NaN"}, "t": ["Infinity"]}
    assert logged.named("non-finite")


def test_null_and_the_word_null_are_not_mistaken_for_nan():
    data = {"a": None, "b": [None, {"c": None}], "text": "return null when unknown", "n": 0.5}
    assert codec.loads(codec.dumps(data)) == data
    assert codec.loads(codec.dumps([None, "null"])) == [None, "null"]


def test_a_lone_surrogate_is_escaped_so_the_line_stays_utf8():
    data = {"text": "a\ud800b", "other": "é"}
    out = codec.dumps(data)
    out.decode("utf-8")  # valid UTF-8
    assert b"\\ud800" in out
    assert codec.loads(out) == data


def test_what_is_not_json_data_is_written_as_the_standard_library_would_name_it():
    class Color(enum.Enum):
        RED = "red"

    class Count(int):
        pass

    class Opaque:
        def __str__(self) -> str:
            return "opaque"

    out = codec.loads(codec.dumps({"o": Opaque(), "e": Color.RED, "n": Count(3),
                                   True: 1, None: 2, 7: 3, (1, 2): 4}))
    assert out == {"o": "opaque", "e": "red", "n": 3, "true": 1, "null": 2, "7": 3, "(1, 2)": 4}


def test_reads_what_older_versions_wrote():
    assert codec.loads(b'{"x": NaN, "y": Infinity}')["y"] == float("inf")
    assert codec.loads(b"\xef\xbb\xbf{\"bom\": 1}") == {"bom": 1}
    assert codec.loads('"\\ud800"') == "\ud800"
    assert codec.loads(b"1e400") == float("inf")
    assert codec.loads('{"a": 1}') == {"a": 1}
    with pytest.raises(ValueError):
        codec.loads(b'{"torn": "')
    with pytest.raises(ValueError):
        codec.loads(b"\xff")


def test_loads_lines_decodes_a_buffer_at_once():
    assert codec.loads_lines(b'{"a":1}\n[2]\n') == [{"a": 1}, [2]]
    with pytest.raises(ValueError):
        codec.loads_lines(b'{"a":1}\n{"torn\n')


def test_importing_the_codec_does_not_import_msgspec():
    code = "import sys, functai, functai._codec; print('msgspec' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_circular_data_is_a_value_error_as_with_json():
    circular: dict = {}
    circular["self"] = circular
    with pytest.raises(ValueError, match="circular"):
        codec.dumps(circular)
