"""Does a plugin's ``Requires-Dist: functai …`` admit the running functai?

Asked of every installed plugin at discovery, where importing ``packaging`` would cost more
than the check: plain ranges on release numbers are decided here (a test checks packaging
agrees), anything else is left to ``packaging``.
"""

from __future__ import annotations

import operator

_NAME = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_COMPARE = {"==": operator.eq, "!=": operator.ne, "<=": operator.le, ">=": operator.ge, "<": operator.lt,
            ">": operator.gt}
_OPERATORS = ("~=", "==", "!=", "<=", ">=", "<", ">")  # two-character ones first
_BLANK = " \t"


class Unsure(Exception):
    """A requirement shape not decided here: ask packaging."""


def _release(text: str) -> tuple[int, ...] | None:
    parts = text.split(".")
    if all(part.isascii() and part.isdigit() for part in parts):
        return tuple(int(part) for part in parts)
    return None


def _admits(op: str, spec: tuple[int, ...], wildcard: bool, running: tuple[int, ...]) -> bool:
    width = max(len(spec), len(running))  # release segments compare padded with zeros
    mine, theirs = running + (0,) * (width - len(running)), spec + (0,) * (width - len(spec))
    if wildcard:  # a prefix match on the release segments
        if op not in ("==", "!="):
            raise Unsure(op)  # not valid PEP 440: packaging refuses it
        return (mine[: len(spec)] == spec) == (op == "==")
    if op == "~=":  # >= spec, and == spec without its last part, as a prefix
        if len(spec) < 2:
            raise Unsure(op)
        return mine >= theirs and mine[: len(spec) - 1] == spec[:-1]
    return bool(_COMPARE[op](mine, theirs))


def _clause(raw: str, running: tuple[int, ...]) -> tuple[str, bool]:
    text = raw.strip(_BLANK)
    op = next((op for op in _OPERATORS if text.startswith(op)), None)
    if op is None:
        raise Unsure(raw)
    version = text[len(op):].lstrip(_BLANK)
    star = version.endswith(".*")
    spec = _release(version[:-2] if star else version)
    if spec is None:
        raise Unsure(raw)
    return f"{op}{version}", _admits(op, spec, star, running)


def functai_specifier(text: str, running: str) -> tuple[str, bool] | None:
    """For one ``Requires-Dist`` string: None when it does not require functai, else
    ``(specifier, admits running)`` as packaging writes the specifier; `Unsure` for other shapes."""
    body = text.lstrip(_BLANK)
    end = 0
    while end < len(body) and body[end] in _NAME:
        end += 1
    while end and not body[end - 1].isalnum():
        end -= 1  # a name ends with a letter or digit
    if body[:end].lower() != "functai":
        return None  # another distribution (or not a requirement at all: packaging would skip it too)
    rest = body[end:]
    have = _release(running)
    if rest.lstrip(_BLANK)[:1] in ("[", "(", "@") or ";" in rest or have is None:
        raise Unsure(text)
    clauses, admits = [], True
    for raw in rest.split(",") if rest.strip(_BLANK) else ():
        clause, ok = _clause(raw, have)
        clauses.append(clause)
        admits = admits and ok
    return ",".join(sorted(clauses)), admits


def functai_requirement(text: str, running: str) -> tuple[str, bool] | None:
    """`functai_specifier`, with ``packaging`` reading what it leaves (a marker that does not apply
    here, such as an extra or another Python, makes it no requirement of this install)."""
    try:
        return functai_specifier(text, running)
    except Unsure:
        pass
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return None
    if canonicalize_name(requirement.name) != "functai":
        return None
    if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
        return None
    specifier = requirement.specifier
    return str(specifier), not specifier or specifier.contains(running, prereleases=True)
