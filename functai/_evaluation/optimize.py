"""``optimize``: a teacher AI function proposes instructions; each is measured with `evaluate`
on the same rows as a new version of the function, and the best is kept."""

from __future__ import annotations

import os
from typing import Any, Iterable, TextIO

import attrs

from .._calls.function import AIFunction, ai
from .._calls.outputs import to_jsonable
from .evaluate import Evaluation, Metric, evaluate, rows_for


@attrs.frozen
class Candidate:
    instruction: str
    score: float
    evaluation: Evaluation


@attrs.frozen
class Optimization:
    """The best function found, and how every instruction scored."""

    best: AIFunction[..., Any]
    baseline: Candidate
    candidates: list[Candidate]

    @property
    def scores(self) -> list[tuple[str, float]]:
        return [(c.instruction, c.score) for c in (self.baseline, *self.candidates)]


def _teacher(lm: str | None) -> AIFunction[..., Any]:
    def propose_instructions(instruction: str, results: list[dict[str, Any]], count: int) -> list[str]:
        """Propose improved instructions for a program that a language model follows.

        You get its current instruction and its results on examples (inputs,
        what was expected, what it answered, whether that passed). Write
        `count` alternative instructions, each complete on its own, that
        would make the failing examples pass without breaking the passing
        ones. Keep what works; be specific about what went wrong.
        """
        raise NotImplementedError

    return (ai(lm=lm) if lm else ai())(propose_instructions)


def optimize(fn: AIFunction[..., Any], rows: Iterable[Any] | None = None, *, teacher_lm: str | None = None,
             candidates: int = 3, metric: Metric | None = None, workers: int | None = None,
             log: str | os.PathLike[str] | None = None,
             progress: bool | None = None, progress_to: TextIO | None = None) -> Optimization:
    """The best instruction found as a new AI function (``fn`` itself when none beats it), and every score."""
    if not isinstance(fn, AIFunction):
        raise TypeError(f"optimize() takes an AI function, not {fn!r}")
    todo, _ = rows_for(fn, rows, log)

    def measure(variant: AIFunction[..., Any], instruction: str) -> Candidate:
        result = evaluate(variant, todo, metric, workers=workers, progress=progress, progress_to=progress_to)
        return Candidate(instruction, result.score, result)

    baseline = measure(fn, fn.instruction)
    results = [  # the teacher's worked examples: never a call whose request a plugin replaced
        {"inputs": to_jsonable(dict(r.inputs)), "expected": to_jsonable(r.expected), "got": to_jsonable(r.got),
         "passed": r.passed >= 1}
        for row, r in zip(todo, baseline.evaluation.rows)
        if row.replayable
    ]
    proposals = _teacher(teacher_lm)(instruction=fn.instruction, results=results, count=candidates)
    scored: list[Candidate] = []
    best, best_score = fn, baseline.score
    for text in dict.fromkeys(p.strip() for p in proposals if isinstance(p, str) and p.strip()):
        if text == fn.instruction:
            continue
        variant = fn.with_instruction(text)
        scored.append(measure(variant, text))
        if scored[-1].score > best_score:
            best, best_score = variant, scored[-1].score
    return Optimization(best=best, baseline=baseline, candidates=scored)
