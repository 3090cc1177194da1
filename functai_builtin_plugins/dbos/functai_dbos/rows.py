"""``functai evaluate --runner dbos``: an evaluation's rows spread over the workers through a DBOS
queue of the evaluation's own, which carries its limits (rows at once, rows per period).

A row passes through DBOS as its JSON (inputs, expected answer, and for a rated call of a
conversation the turns it was shown); its result comes back the same way. Each row is a
workflow of one step, so a row whose worker died is asked again (the step had not ended) and a
row whose step ended is never asked again.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any, TextIO

import attrs
import functai
import functai.evaluation

#: Seconds between looks at how many rows have ended.
POLL = 0.5
#: Seconds an evaluation waits with no row taken by any worker before it says so (once; it goes on waiting).
IDLE = 30.0
#: The states a row's workflow ends in (DBOS 3.4).
ENDED = ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")


def evaluate(program: Any, *, log: str, workers: int | None, rate: tuple[int, float] | None,
             progress_to: TextIO | None) -> functai.evaluation.Evaluation:
    from . import ENV, VERSION, _client, _launched, _set_up
    from .workflow import ROW

    url = _launched[0] if _launched else os.environ.get(ENV)
    if not url:
        raise functai.FunctAIError(f"name the workers' system database in {ENV} to evaluate on them",
                                   code="dbos-url")
    rows, skipped = functai.evaluation.rows_for(program, None, log)
    client, evaluation = _client(url), os.urandom(6).hex()
    queue = f"functai.rows.{evaluation}"
    limiter = {"limit": rate[0], "period": rate[1]} if rate else None
    with _set_up():
        client.register_queue(queue, global_concurrency=workers, limiter=limiter, polling_interval_sec=0.2)
    try:
        function = f"{program.module}:{program.fn.__qualname__}"
        ids = [f"{evaluation}-{n}" for n in range(len(rows))]
        try:
            for workflow_id, row in zip(ids, rows):
                options = {"queue_name": queue, "workflow_name": ROW, "workflow_id": workflow_id,
                           "app_version": VERSION}
                client.enqueue(options, function, attrs.asdict(row, recurse=False))
            outputs = _await(client, evaluation, len(ids), progress_to, program)
        except BaseException:  # Ctrl-C, say: no worker asks the rest once the evaluation is given up
            with contextlib.suppress(Exception):  # the database gone too: the first error is the one to see
                for status in client.list_workflows(workflow_id_prefix=f"{evaluation}-",
                                                    status=["ENQUEUED", "PENDING"], load_input=False,
                                                    load_output=False):
                    client.cancel_workflow(status.workflow_id)
            raise
    finally:
        client.delete_queue(queue)
    results = [functai.evaluation.RowResult(**outputs[workflow_id]) for workflow_id in ids]
    return functai.evaluation.Evaluation.of(results, skipped)


def _await(client: Any, evaluation: str, total: int, progress_to: TextIO | None, program: Any) -> dict[str, Any]:
    """Every row's result by workflow id, once all have ended (a line of progress as they do)."""
    shown = -1
    idle_since: float | None = time.monotonic()  # None once a worker took a row, or the evaluation said none did
    while True:
        ended = client.list_workflows(workflow_id_prefix=f"{evaluation}-", status=list(ENDED),
                                      load_input=False, load_output=False)
        if progress_to is not None and len(ended) != shown and progress_to.isatty():
            shown = len(ended)
            progress_to.write(f"\revaluating {program.name} on DBOS workers: {shown}/{total}")
            progress_to.flush()
        if len(ended) == total:
            break
        if idle_since is not None:
            if ended or client.list_workflows(workflow_id_prefix=f"{evaluation}-", status=["PENDING"], limit=1,
                                              load_input=False, load_output=False):
                idle_since = None  # a worker took a row
            elif time.monotonic() - idle_since >= IDLE:
                idle_since = None
                _no_worker(progress_to, program.module)
        time.sleep(POLL)
    failed = [status for status in ended if status.status != "SUCCESS"]
    if failed:  # a row's failure is a result; a workflow that failed is not
        raise functai.FunctAIError(f"{len(failed)} rows' workflows failed, e.g. {failed[0].workflow_id}: "
                                   f"{failed[0].error}", code="dbos-row-failed")
    done = client.list_workflows(workflow_id_prefix=f"{evaluation}-", load_input=False)
    return {status.workflow_id: status.output for status in done}


def _no_worker(progress_to: TextIO | None, module: str) -> None:
    """Say that no worker takes the rows (to the command line's error stream, else as a log event)."""
    message = (f"no worker has taken a row in {IDLE:g} s; the evaluation waits for one: start one on the same "
               f"system database (FUNCTAI_DBOS_URL=... functai worker --runner dbos --import {module})")
    if progress_to is None:
        import logging

        logging.getLogger("functai_dbos").warning(message)
        return
    progress_to.write(f"\n{message}\n")
    progress_to.flush()
