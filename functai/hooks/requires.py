"""Does a plugin's ``Requires-Dist: functai …`` admit the running functai?

Asked of every installed plugin at discovery. ``packaging`` answers it
exactly but costs milliseconds to import, so the common shapes — no marker,
clauses like ``>=0.1,<2`` or ``==0.1.*`` on plain release numbers — are
decided here by PEP 440's rules for release segments (compared padded with
zeros, ``.*`` a prefix match, ``~=`` both), and anything else (markers,
extras, URLs, pre-/post-/dev-/local versions, ``===``, a running version
that is not a plain release) is left to ``packaging``. A test checks that
both agree on every shape decided here.
"""

from __future__ import annotations

import re

_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")
_CLAUSE = re.compile(r"\s*(~=|==|!=|<=|>=|<|>)\s*(\d+(?:\.\d+)*)(\.\*)?\s*$")
_RELEASE = re.compile(r"\d+(?:\.\d+)*$")
_RUNS = re.compile(r"[-_.]+")


class Unsure(Exception):
    """A requirement shape not decided here: ask packaging."""


def _padded(a: tuple[int, ...], width: int) -> tuple[int, ...]:
    return a + (0,) * (width - len(a))


def _admits(op: str, spec: tuple[int, ...], wildcard: bool, running: tuple[int, ...]) -> bool:
    width = max(len(spec), len(running))
    mine, theirs = _padded(running, width), _padded(spec, width)
    if wildcard:  # a prefix match on the release segments
        if op not in ("==", "!="):
            raise Unsure(op)  # not valid PEP 440: packaging refuses it
        return (mine[: len(spec)] == spec) == (op == "==")
    if op == "~=":  # >= spec, and == spec without its last part, as a prefix
        if len(spec) < 2:
            raise Unsure(op)
        return mine >= theirs and mine[: len(spec) - 1] == spec[:-1]
    if op == "==":
        return mine == theirs
    if op == "!=":
        return mine != theirs
    if op == "<=":
        return mine <= theirs
    if op == ">=":
        return mine >= theirs
    return mine < theirs if op == "<" else mine > theirs


def functai_specifier(text: str, running: str) -> tuple[str, bool] | None:
    """For one ``Requires-Dist`` string: None when it does not require functai, else
    ``(specifier, admits running)``, the specifier written as packaging writes it.

    Raises `Unsure` for a shape not decided here.
    """
    match = _NAME.match(text)
    if match is None or _RUNS.sub("-", match.group(1)).lower() != "functai":
        return None  # another distribution (or not a requirement at all: packaging would skip it too)
    rest = text[match.end():]
    if rest.lstrip()[:1] in ("[", "(", "@") or ";" in rest or not _RELEASE.match(running):
        raise Unsure(text)
    have = tuple(int(part) for part in running.split("."))
    clauses, admits = [], True
    for raw in rest.split(",") if rest.strip() else ():
        clause = _CLAUSE.match(raw)
        if clause is None:
            raise Unsure(text)
        op, version, star = clause.groups()
        admits = _admits(op, tuple(int(part) for part in version.split(".")), bool(star), have) and admits
        clauses.append(f"{op}{version}{star or ''}")
    return ",".join(sorted(clauses)), admits
