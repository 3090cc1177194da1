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
from typing import Any, Mapping, Sequence, TypeGuard

from .._errors import FunctAIError, Waiting
from .._hooks.events import Answer, Decide, Question
from .._log import warn
from .outputs import to_jsonable

#: The reason a refusal gives when the function that was to decide failed (a check that fails refuses).
CHECK_FAILED = "a check failed"

#: Characters of the digest an approval's key ends with (the whole digest is kept beside it).
KEY_DIGITS = 12


#: What `json.dumps` builds for each call with these options: made once, the same text.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(name: str, input: Mapping[str, Any], plugins: Sequence[Sequence[str]]) -> str:
    """SHA-256 of the tool's name, its input (JSON data) and ``[[plugin, version], …]``, as canonical JSON."""
    return hashlib.sha256(_CANONICAL.encode([name, input, plugins]).encode()).hexdigest()


def named_key(approval: Mapping[str, Any] | str | None) -> str | None:
    """The key an answer names: a key itself, an approval's ``key``, or None (every approval)."""
    return approval if isinstance(approval, str) else (approval or {}).get("key")


def is_extension(value: Any) -> TypeGuard[float]:
    """Whether ``value`` can be an extension a question offers or an answer grants: a number from 0 up."""
    return value.__class__ in (int, float) and 0 <= value < float("inf")


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


def check_extension(value: Any) -> None:
    """What a person grants with ``approve(extend=...)``, at a turn or a stream: a number from 0 up."""
    if not is_extension(value):
        raise FunctAIError(f"approve(extend=...) is a number from 0 up, not {value!r}", code="input-invalid")


class AskedAtStream(FunctAIError):
    """Raised through a hook's handlers when the person at a stream can be asked: the driver asks
    (`functai._calls.steps.Ask`) and the hook runs again with the answer."""

    code = "approval-asked"

    def __init__(self, approval: dict[str, Any]) -> None:
        super().__init__("a person at the stream is asked")
        self.approval = approval


def decided(decide: Decide, question: Question, function: str) -> Answer:
    """What ``decide`` answers to a question (`Decide`); one that fails refuses, never lets the
    request be sent or the tool run."""
    try:
        given = decide(question)
    except Exception as error:
        warn("decide function failed", plugin=question.plugin, function=function,
             error=f"{type(error).__name__}: {error}")
        return Answer(False, reason=CHECK_FAILED)
    offer, plugin = question.extend, question.plugin
    if given is True:
        return Answer(True, offer)
    if is_extension(given):
        return Answer(True, given)
    if given is None or given is False:
        return Answer(False)
    if isinstance(given, str) and given:
        return Answer(False, reason=given)
    warn("decide function returned no answer", plugin=plugin, returned=repr(given)[:80])
    return Answer(False, reason=CHECK_FAILED)
