"""What runs between an approval and the tool's start stays what it was: the digest's bytes (kept in
waiting turns and compared at resume), the record's JSON, and the store's durable write."""

from __future__ import annotations

import enum
import hashlib
import json
import random

import pytest

from functai.testing import log_events

from functai import _codec as codec
from functai._calls.approvals import digest
from functai._calls.outputs import to_jsonable


def reference(name: str, input: object, plugins: object) -> str:
    """The digest as it has been computed since approvals had one (`json.dumps` each call)."""
    text = json.dumps([name, input, plugins], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


#: Digests recorded in waiting turns by earlier versions: a resume compares against these bytes.
RECORDED = [
    (("refund", {"order": "A1-2024-11-0042", "amount": 129.5, "currency": "EUR", "reason": "damaged on arrival"},
      [["limits", "1.2.0"], ["pii", "0.4.1"]]),
     "15faf9bacf37c986373b40f0348a8eb0e31fa62d66e28cbcc2e5697d14bc393b"),
    (("pay", {"amount": 0.1 + 0.2, "tiny": 5e-324, "huge": 1e308, "exp": 1e16, "neg": -0.0, "third": 1 / 3}, []),
     "4ea71223b6242a3965d6d84fa54b2243d537bf45df0a2d29a77e07d82805e1ab"),
    (("send", {"to": "zoë@example.org", "body": "Grüße — 你好 👋\n\t\"quoted\" \\ back\u2028", "ctl": "\x00\x1f\x7f"},
      [["π", "0.1"]]),
     "95cecbe07ea4433ef53a034f21da112e94eb905e1fb917f5b06ce93c7f89ba1d"),
    (("deep", {"z": {"b": [1, {"d": None, "c": True}], "a": []}, "a": [[], {}], "m": {"é": 1, "e": 2, "E": 3}},
      [["a", "1"]]),
     "ebd0f9eb9fc7290b75b26624ddb3a66848c5d743d18b9cb9054f734ddd6ffdd6"),
    (("big", {"n": 2**64 + 1, "m": -(2**70), "k": 123456789012345678901234567890, "f": False}, []),
     "f9717ee0d5787ea317cb6ae6661f9f94b0dd8b5c8b7aa32965d59e8888527426"),
]


@pytest.mark.parametrize("call, recorded", RECORDED)
def test_the_digest_of_a_call_is_the_one_recorded_before(call, recorded):
    assert digest(*call) == recorded == reference(*call)


def _value(rng: random.Random, depth: int) -> object:
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice([0, -1, 7, 2**53 + 1, 2**64, -(10**30), rng.randrange(-10**6, 10**6)])
    if kind == 2:
        return rng.choice([0.0, -0.0, 0.1, 1e16, 1e-7, 1 / 3, 1e308, 5e-324, rng.uniform(-1e6, 1e6)])
    if kind in (3, 4, 5):
        return "".join(rng.choice("aZ09 _-\"\\/\n\t\x01\x7féü中文😀\u2028\ufeff") for _ in range(rng.randrange(12)))
    if kind in (6, 7):
        return {rng.choice(["a", "b", "B", "é", "10", "9", "", " ", "zz"]) + str(i): _value(rng, depth + 1)
                for i in range(rng.randrange(5))}
    return [_value(rng, depth + 1) for _ in range(rng.randrange(5))]


def test_the_digest_matches_the_reference_over_varied_data():
    rng = random.Random(20261202)
    for _ in range(2000):
        name = rng.choice(["refund", "send_email", "ünïcode", "t"])
        input = {f"k{i}": _value(rng, 0) for i in range(rng.randrange(6))}
        plugins = [[rng.choice(["limits", "pii", "π"]), f"{rng.randrange(3)}.{rng.randrange(20)}"]
                   for _ in range(rng.randrange(3))]
        assert digest(name, input, plugins) == reference(name, input, plugins), (name, input, plugins)


def test_the_digest_refuses_what_it_refused_before():
    for bad in ({"text": "a\ud800b"}, {1: "x", "a": "y"}):  # a lone surrogate; keys that cannot be sorted
        with pytest.raises(Exception) as before:
            reference("t", bad, [])
        with pytest.raises(type(before.value)):
            digest("t", bad, [])
    nan = {"x": float("nan"), "y": float("inf")}  # never in a question (inputs are JSON data), but the same
    assert digest("t", nan, []) == reference("t", nan, [])


class Color(enum.Enum):
    RED = "red"


class Key(str, enum.Enum):
    A = "a"


class Ratio(float):
    pass


def test_nested_containers_convert_as_before():
    loop: dict = {"n": 1}
    loop["self"] = loop
    items: list = [1]
    items.append(items)
    value = {"entry": {"input": {Color.RED: [Color.RED, (1, 2), {3, 1}], Key.A: Ratio(0.5), 7: None},
                       "flags": [True, 1.5, "x", [{"deep": b"b"}]]},
             "loop": loop, "items": items}
    out = to_jsonable(value)
    assert out == {"entry": {"input": {"red": ["red", [1, 2], [1, 3]], "a": 0.5, "7": None},
                             "flags": [True, 1.5, "x", [{"deep": "b'b'"}]]},
                   "loop": {"n": 1, "self": repr(loop)}, "items": [1, repr(items)]}
    assert out["entry"] is not value["entry"] and out["entry"]["flags"] is not value["entry"]["flags"]  # copies


def test_a_non_finite_number_deep_in_a_record_is_still_found():
    record = {"kind": "tool", "n": 1, "ok": True, "none": None, "f": 0.5,
              "entry": {"input": {"a": [1.0, {"b": float("nan")}], "c": float("-inf")}}}
    with log_events() as logged:
        line = codec.dumps(record, non_finite="text")
    assert logged.named(r"entry\.input\.a\[1\]\.b, entry\.input\.c")
    assert json.loads(line) == {**record, "entry": {"input": {"a": [1.0, {"b": "NaN"}], "c": "-Infinity"}},
                                "none": None}
    assert codec.dumps({"kind": "tool", "f": 0.5, "entry": {"input": {"x": 1e300}}}) == \
        b'{"kind":"tool","f":0.5,"entry":{"input":{"x":1e300}}}'
