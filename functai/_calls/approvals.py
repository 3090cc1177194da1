"""An approval bound to what it approved.

When a person is asked about a tool call, the question carries a digest of the
tool's name, its input as it will run and the plugins whose ``tool_call``
handlers ran before the one asking. An answer holds only for that digest: a
resumed turn computes it again before the tool runs, and any difference (an
upgraded plugin, an input a handler changed, an edit) is a new question.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping, Sequence

from .._errors import FunctAIError, Waiting
from .outputs import to_jsonable

#: The reason a refusal gives when the function that was to decide failed (a check that fails refuses).
CHECK_FAILED = "a check failed"

#: Characters of the digest an approval's key ends with (the whole digest is kept beside it).
KEY_DIGITS = 12


#: What `json.dumps` builds for each call with these options: made once, the same text.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(name: str, input: Mapping[str, Any], plugins: Sequence[Sequence[str]]) -> str:
    """SHA-256 of the tool's name, its input (JSON data) and ``[[plugin, version], …]``, as canonical JSON:
    `json.dumps` with sorted keys, compact, UTF-8. Digests are kept in waiting turns, so these bytes never change."""
    value = [name, input, plugins]
    encode = _sorted_encoder or _make_sorted_encoder()
    try:
        same = encode is not False and _written_alike(value)
    except RecursionError:  # a cycle, or too deep: json says which
        same = False
    text = encode(value) if same else _CANONICAL.encode(value).encode()  # type: ignore[operator]
    return hashlib.sha256(text).hexdigest()


def _written_alike(value: Any) -> bool:
    """Whether msgspec's sorted encoder writes ``value`` exactly as `_CANONICAL`: text keys, and
    the types both write alike — floats only where both write them without an exponent."""
    t = type(value)
    if t is str or t is int or t is bool or value is None:
        return True
    if t is float:
        return value == 0.0 or 1e-4 <= abs(value) < 1e16
    if t is dict:
        for key, item in value.items():
            if type(key) is not str or not _written_alike(item):
                return False
        return True
    if t is list or t is tuple:
        for item in value:
            if not _written_alike(item):
                return False
        return True
    return False


#: msgspec's encoder with sorted keys (it writes a question's data several times faster than
#: json, which only digests use), or False where it would not write the same bytes.
_sorted_encoder: Any = None

#: Values on which both encoders must agree before msgspec's is used: escapes, non-ASCII text and
#: key order, floats at the edges of the range `_written_alike` allows, integers past 64 bits.
_PROBE = ["\x00\x1f\"\\/\x7f\u2028é中😀", {"b": 1, "a": [], "é": {}, "E": None, "😀": True, "": "\n"},
          [0.0001, 9999999999999998.0, 0.1, -0.0, 1.0, 123.456, 1 / 3, 2.0**53], [2**64 + 1, -(10**30)]]


def _make_sorted_encoder() -> Any:
    global _sorted_encoder
    try:
        import msgspec

        encode = msgspec.json.Encoder(order="sorted").encode  # msgspec 0.18.6 or later
    except TypeError:
        encode = False
    else:
        if encode(_PROBE) != _CANONICAL.encode(_PROBE).encode():
            encode = False
    _sorted_encoder = encode
    return encode


def key_of(base: str, digest: str) -> str:
    """An approval's key: where it was asked (``site.plugin``) and the start of what it approves."""
    return f"{base}.{digest[:KEY_DIGITS]}"


def edited_digest(approval: Mapping[str, Any], inputs: Mapping[str, Any] | None) -> str | None:
    """The digest an answer approves: the question's, or with an edit, that of the edited input."""
    if not inputs:
        return approval.get("digest")
    return digest(approval["name"], {**approval["input"], **to_jsonable(dict(inputs))}, approval.get("plugins") or [])


def settle(base: str, asked: str, answers: Mapping[str, Mapping[str, Any]]) -> tuple[Mapping[str, Any] | None,
                                                                                     Mapping[str, Any] | None]:
    """Of the answers given at ``base``, the one that decides the question with digest ``asked``,
    and an approval that no longer fits (stale) when none does.

    A denial decides whatever was asked: refusing is always safe. An approval decides only its
    own digest; one recorded before approvals had digests decides its own key.
    """
    stale = None
    for key, answer in answers.items():
        if key != base and not key.startswith(base + "."):
            continue
        if not answer["allow"]:
            return answer, None
        approved = answer.get("digest")
        if approved == asked or (approved is None and key == base):
            return answer, None
        stale = answer
    return None, stale


class StaleApproval(Waiting):
    """A tool call approved before is not the one that would run now: the turn waits for a new answer."""

    code = "approval-stale"


def stale_error(path: str, approved: Mapping[str, Any], asked: Mapping[str, Any]) -> StaleApproval:
    """``approval-stale``, naming what changed between the approved call and the one asked now."""
    changed = []
    if approved.get("name") != asked["name"]:
        changed.append(f"the tool ({approved.get('name')!r} → {asked['name']!r})")
    before, now = approved.get("input") or {}, asked["input"]
    for name in sorted(set(before) | set(now)):
        was_set, is_set = before.get(name, "<unset>"), now.get(name, "<unset>")
        if was_set != is_set:
            changed.append(f"input {name!r} ({_short(was_set)} → {_short(is_set)})")
    was = {p[0]: p[1] for p in approved.get("plugins") or ()}
    is_ = {p[0]: p[1] for p in asked["plugins"]}
    for plugin in sorted(set(was) | set(is_)):
        if was.get(plugin) != is_.get(plugin):
            changed.append(f"plugin {plugin!r} ({was.get(plugin) or 'absent'} → {is_.get(plugin) or 'absent'})")
    what = "; ".join(changed) or "what the digest covers"
    return StaleApproval(
        f"the approval of {path} was given for another call than the one that would run now: {what}. "
        "The tool did not run; the turn waits for an answer to the call as it is now",
        approvals=[dict(asked)],
    )


def _short(value: Any) -> str:
    text = json.dumps(to_jsonable(value), ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def check_edit(inputs: Any, takes: Sequence[str] | None, name: str) -> dict[str, Any]:
    """An edit made on approving: a dict of inputs the tool takes (``input-invalid`` otherwise)."""
    if not isinstance(inputs, Mapping) or not inputs or not all(isinstance(k, str) for k in inputs):
        raise FunctAIError(f"inputs= on approving {name} must be a non-empty dict of the tool's inputs by name",
                           code="input-invalid")
    if takes is not None:
        unknown = sorted(set(inputs) - set(takes))
        if unknown:
            raise FunctAIError(
                f"{name} takes no input {', '.join(map(repr, unknown))}; its inputs are {', '.join(takes) or 'none'}: "
                "an edit on approving changes this tool's own inputs only",
                code="input-invalid",
            )
    return dict(inputs)
