"""Runners: where turns and evaluations run. The default runs them in the process that asks; a
distribution offers another — an engine's workers on many machines — in the entry-point group
``functai.runners``, chosen with ``--runner NAME`` by ``functai evaluate``, ``functai resume``
and ``functai worker``.

A runner is what its entry point gives: an object with the three methods of `Runner`, or a
function of no arguments that makes one. A method may refuse what its engine does not do, with
a `FunctAIError` saying so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, Sequence, TextIO

from ._errors import FunctAIError

if TYPE_CHECKING:
    from ._evaluation.evaluate import Evaluation

GROUP = "functai.runners"
#: The default runner's name: turns and evaluations run in the process that asks for them.
IN_PROCESS = "process"


class Runner(Protocol):
    """What ``--runner NAME`` uses."""

    def evaluate(self, program: Any, *, log: str, workers: int | None, progress_to: TextIO | None) -> Evaluation:
        """The function (an AI function) asked again on the log's rated calls, and the score. A runner
        that queues rows also takes ``rate=(N, seconds)``: at most N rows asked in that time
        (``--rate``); `functai.evaluation` has what it needs to list, ask and score the rows."""

    def resume(self, chat: Any, turn_id: str, *, rerun: Sequence[str]) -> Any:
        """A turn that was interrupted, or waited and is answered, going on: its answer, or `functai.Waiting`."""

    def worker(self, imports: Sequence[str]) -> int:
        """Serve as a worker (the modules ``imports`` imported first); the exit status when it stops."""


class InProcess:
    """Today's way: an evaluation on this machine's threads, a turn resumed in this process."""

    def evaluate(self, program: Any, *, log: str, workers: int | None, progress_to: TextIO | None,
                 rate: tuple[int, float] | None = None) -> Evaluation:
        if rate is not None:
            raise FunctAIError(f"the {IN_PROCESS!r} runner asks rows on this machine's threads, as many at once as "
                               "--workers says; --rate needs a runner that queues rows (--runner NAME)",
                               code="runner-unsupported")
        from ._evaluation import evaluate

        return evaluate(program, log=log, workers=workers, progress_to=progress_to)

    def resume(self, chat: Any, turn_id: str, *, rerun: Sequence[str]) -> Any:
        return chat.turn(turn_id).resume(rerun=rerun)

    def worker(self, imports: Sequence[str]) -> int:
        raise FunctAIError(
            f"the {IN_PROCESS!r} runner runs turns and evaluations in the process that asks for them, so it has no "
            f"workers; name a runner that has (--runner NAME: one a distribution adds to the entry-point group "
            f"{GROUP!r})", code="runner-no-workers")


def find_runner(name: str | None) -> Runner:
    """The runner called ``name`` (None: the default, `InProcess`); ``runner-unknown`` naming those
    installed, or ``runner-load`` when it fails to load."""
    if name is None or name == IN_PROCESS:
        return InProcess()
    from ._hooks.installed import entry_points

    found = entry_points(GROUP)
    named = [entry for entry in found if entry.name == name]
    if not named:
        have = ", ".join(sorted({IN_PROCESS, *(entry.name for entry in found)}))
        raise FunctAIError(f"no runner named {name!r}; the runners here: {have} (a runner's distribution adds it "
                           f"to the entry-point group {GROUP!r}: pip install it)", code="runner-unknown")
    try:
        made = named[0].load()
        runner = made if hasattr(made, "resume") and not isinstance(made, type) else made()  # else a class or factory
    except (Exception, SystemExit) as error:  # an import that exits is a failure too
        raise FunctAIError(f"runner {name!r} ({named[0].value}) failed to load: {type(error).__name__}: {error}",
                           code="runner-load") from error
    missing = [method for method in ("evaluate", "resume", "worker") if not callable(getattr(runner, method, None))]
    if missing:
        raise FunctAIError(f"runner {name!r} ({named[0].value}) has no {', '.join(missing)} method", code="runner-load")
    return runner  # type: ignore[no-any-return]
