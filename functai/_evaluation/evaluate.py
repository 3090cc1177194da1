"""``evaluate``: score a function as it is now on rated calls (or given rows).

Rated calls are asked again as they were shown (see `functai._evaluation.replay`),
so what changed since is what is measured.
"""

from __future__ import annotations

import contextvars
import itertools
import math
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Mapping, Sequence, TextIO

import attrs

from .._calls.outputs import to_jsonable
from .._calls.reading import read_calls
from .._calls.records import CallRecord
from .._calls.scope import current_turn
from .._errors import FunctAIError, ModelConfigError, ModelError, NonAnswerError
from .._layers import current_values, resolve
from .._log import warn
from .ratings import log_folder
from .replay import NotReplayable, ReplayedTurn, shown, turn_calls

#: ``metric(expected, got) -> bool | float`` (1.0 / True is a pass).
Metric = Callable[[Any, Any], Any]


@attrs.frozen
class Row:
    """One thing to ask: inputs, what is expected, and (for a rated call) how it was shown."""

    inputs: Mapping[str, Any]
    expected: Any = None
    #: False when the row only knows a wrong answer (a bad rating without a correction).
    agree: bool = True
    record: str | None = None
    history: Sequence[Mapping[str, Any]] = ()
    sections: Sequence[str] = ()
    #: False when a request handler replaced the rated call's request: still a row, never a worked example.
    replayable: bool = True


@attrs.frozen
class RowResult:
    """One row's result; ``call`` is the new call's record id, ``record`` the rated call it came from."""

    inputs: Mapping[str, Any]
    expected: Any
    got: Any
    passed: float
    call: str | None
    record: str | None = None
    error: str | None = None
    #: The failed call's error code (``model-http``, ``output-invalid`` …).
    code: str | None = None
    #: The call failed because the model could not be used (no reply, or no model set up).
    model_unusable: bool = False


@attrs.frozen
class Evaluation:
    """A score (the mean of the rows' results), its 95% interval, and every row."""

    score: float
    interval: tuple[float, float]
    rows: list[RowResult]
    #: Rated calls left out because they could not be asked again as they were: (call id, why).
    skipped: list[tuple[str, str]] = attrs.field(factory=list)

    @classmethod
    def of(cls, rows: list[RowResult], skipped: list[tuple[str, str]]) -> "Evaluation":
        """The evaluation of these results: their mean and its interval."""
        values = [r.passed for r in rows]
        return cls(score=sum(values) / len(values) if values else 0.0, interval=interval(values), rows=rows,
                   skipped=skipped)

    @property
    def model_failures(self) -> list[RowResult]:
        """The rows that failed because the model could not be used."""
        return [row for row in self.rows if row.model_unusable]

    def table(self) -> str:
        lines = [f"score {self.score:.3f}  (95% interval {self.interval[0]:.3f}–{self.interval[1]:.3f}, "
                 f"{len(self.rows)} rows, {len(self.skipped)} skipped)"]
        for row in self.rows:
            mark = "pass" if row.passed >= 1 else ("fail" if row.passed <= 0 else f"{row.passed:.2f}")
            inputs = ", ".join(f"{k}={_short(v)}" for k, v in row.inputs.items())
            lines.append(f"  {mark:<5} {inputs:<40} expected {_short(row.expected):<24} got {_short(row.got)}"
                         + (f"  [{row.error}]" if row.error else ""))
        for call, why in self.skipped:
            lines.append(f"  skip  {call}: {why}")
        return "\n".join(lines)


def _short(value: Any, width: int = 24) -> str:
    text = value if isinstance(value, str) else repr(to_jsonable(value))
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def rows_for(
    fn: Any, rows: Iterable[Any] | None, log: str | os.PathLike[str] | None
) -> tuple[list[Row], list[tuple[str, str]]]:
    """The rows to ask (``rows``, or the rated calls of every version of ``fn``), and the rated calls left out."""
    if rows is not None:
        return [_given_row(row) for row in rows], []
    todo: list[Row] = []
    skipped: list[tuple[str, str]] = []
    folder = log_folder(log)
    calls = turn_calls(read_calls(folder))  # the turns they were shown, from the log itself
    check = resolve(fn.own).values["check_inputs"]
    for record in read_calls(folder, rated=True, function=fn):
        try:
            history, sections = shown(record, calls)
            inputs = fn.read_inputs(record.inputs, check)  # as first given: a model, a dataclass, an enum
        except NotReplayable as error:
            why = error.message
        except FunctAIError as error:  # the store of its conversation cannot be read here
            why = f"{error.code}: {error.message}"
        except (TypeError, ValueError) as error:  # inputs renamed or retyped since the call
            why = f"its inputs do not fit {fn.name} now ({error})"
        else:
            todo.append(_rated_row(record, inputs, history, sections))
            continue
        warn("rated call left out", call=record.id, reason=why)
        skipped.append((record.id, why))
    return todo, skipped


def _rated_row(record: CallRecord, inputs: dict[str, Any], history: list[dict[str, Any]],
               sections: list[str]) -> Row:
    rating = record.rating or {}
    if rating.get("good"):
        expected, agree = record.output, True
    elif rating.get("correction") is not None:
        expected, agree = rating["correction"], True
    else:
        expected, agree = record.output, False  # only known to be wrong: a different answer agrees
    return Row(inputs=inputs, expected=expected, agree=agree, record=record.id, history=history,
               sections=sections, replayable=record.replayable)


def _given_row(row: Any) -> Row:
    if isinstance(row, Row):
        return row
    if isinstance(row, Mapping) and "inputs" in row:
        return Row(inputs=dict(row["inputs"]), expected=row.get("expected"))
    if isinstance(row, (tuple, list)) and len(row) == 2:
        return Row(inputs=dict(row[0]), expected=row[1])
    raise TypeError(f"a row is {{'inputs': {{...}}, 'expected': ...}} or (inputs, expected), not {row!r}")


def exact(expected: Any, got: Any) -> bool:
    """The default metric: the same value (as JSON data; text compared without outer whitespace)."""
    got, expected = to_jsonable(got), to_jsonable(expected)
    if isinstance(got, str) and isinstance(expected, str):
        return got.strip() == expected.strip()
    return bool(got == expected)


def interval(values: Sequence[float]) -> tuple[float, float]:
    """A 95% interval for the mean: Wilson's for pass/fail rows, else the normal one."""
    n = len(values)
    if n == 0:
        return (0.0, 0.0)
    mean = sum(values) / n
    z = 1.959964
    if all(v in (0.0, 1.0) for v in values):
        centre = (mean + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(mean * (1 - mean) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return (max(0.0, centre - half), min(1.0, centre + half))
    if n == 1:
        return (mean, mean)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return (mean - z * sd / math.sqrt(n), mean + z * sd / math.sqrt(n))


def ask(fn: Any, row: Row, metric: Metric | None = None) -> RowResult:
    """Ask ``fn`` one row, as it was shown for a rated call; its result (a failure is a result too)."""
    scope = ReplayedTurn(fn, row.history, row.sections)
    scope.inputs_checked = row.record is not None  # a rated call's, by `read_inputs` as they were read back
    token = current_turn.set(scope)
    try:
        got, record = fn.run(**row.inputs)
    except FunctAIError as error:
        record_id = error.record.id if error.record is not None else None
        # No model, or no reply at all: the row measured an outage. A reply that is not an answer came from a model.
        unusable = isinstance(error, ModelConfigError) or (isinstance(error, ModelError)
                                                             and not isinstance(error, NonAnswerError))
        return RowResult(row.inputs, row.expected, None, 0.0, record_id, row.record, f"{error.code}: {error.message}",
                         error.code, unusable)
    except Exception as error:
        return RowResult(row.inputs, row.expected, None, 0.0, None, row.record, f"{type(error).__name__}: {error}")
    finally:
        current_turn.reset(token)
    if metric is not None:
        passed = float(metric(row.expected, got))
    else:
        same = exact(row.expected, got)
        passed = float(same if row.agree else not same)
    return RowResult(row.inputs, row.expected, got, passed, record.id, row.record)


def _progress(total: int, label: str, show: bool | None, stream: TextIO | None) -> Callable[[], None]:
    """A step function drawing a one-line bar on ``stream`` (else stderr) when it is a terminal or ``show`` says so."""
    stream = stream if stream is not None else sys.stderr
    if show is None:
        try:
            show = bool(stream.isatty())
        except (AttributeError, OSError, ValueError):  # no isatty, or a closed or detached stream
            show = False
    if not total or not show:
        return lambda: None
    done = itertools.count(1)
    lock = threading.Lock()

    def draw(count: int) -> None:
        filled = 30 * count // total
        end = "\n" if count == total else ""
        stream.write(f"\r{label} [{'#' * filled}{'.' * (30 - filled)}] {count}/{total}{end}")
        stream.flush()

    def step() -> None:
        with lock:
            draw(next(done))

    draw(0)
    return step


def evaluate(fn: Any, rows: Iterable[Any] | None = None, metric: Metric | None = None, *, workers: int | None = None,
             log: str | os.PathLike[str] | None = None, progress: bool | None = None,
             progress_to: TextIO | None = None) -> Evaluation:
    """Score ``fn`` as it is now (docs/evaluating.md).

    ``rows``: None for the rated calls of ``fn`` in the call log, or
    ``{"inputs": {...}, "expected": ...}`` / ``(inputs, expected)`` items.
    Rows run in ``workers`` threads, each in a copy of the caller's context.
    """
    todo, skipped = rows_for(fn, rows, log)
    count = workers or current_values().get("workers") or 4
    step = _progress(len(todo), f"evaluating {fn.name}", progress, progress_to)

    def one(row: Row) -> RowResult:
        try:
            return ask(fn, row, metric)
        finally:
            step()

    if count == 1 or len(todo) <= 1:
        results = [one(row) for row in todo]
    else:
        with ThreadPoolExecutor(max_workers=count) as pool:
            futures = [pool.submit(contextvars.copy_context().run, one, row) for row in todo]
            results = [future.result() for future in futures]
    return Evaluation.of(results, skipped)
