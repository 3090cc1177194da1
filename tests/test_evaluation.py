"""Ratings, evaluation and the optimizer: rated calls asked again as they were shown."""

import io
import json

import pytest
from functai_compaction import compaction

import functai
from functai import Change, FunctAIError, Plugin, ai
from functai._stores import open_store
from functai.testing import ScriptedLM, log_events


def tutor_v1():
    @ai
    def tutor(question: str) -> str:
        """Tutor the student (first version)."""

    return tutor


def tutor_v2():
    @ai
    def tutor(question: str) -> str:
        """Tutor the student, step by step (improved)."""

    return tutor


def summarizing(request):
    if request.messages[0]["content"].startswith("Summarize a conversation"):
        return "They covered Q1 and Q2."
    return "A" + request.messages[-1]["content"].removeprefix("question: Q")


def test_a_rated_turn_is_asked_again_as_it_was_shown_and_nothing_else(tmp_path, durable_store, durable_log):
    log, store = durable_log, durable_store
    old_host = Plugin("old-host", before_call=lambda c: Change(sections=["OLD HOST RULE."], lm="host-model"))
    with functai.settings(client=ScriptedLM(reply=summarizing), log_calls=log, plugins=[old_host]):
        chat = tutor_v1().conversation("alex", store=store, plugins=[compaction(keep=2, every=2)])
        for i in range(1, 6):
            chat(f"Q{i}")
    fifth = [r for r in functai.read_calls(log) if r.function == "tutor"][-1]
    assert fifth.inputs == {"question": "Q5"} and "(2 turns, summarized)" in fifth.sections[0]
    functai.rate(fifth, good=True, by="teacher", log=log)
    records_before = open_store(store).read("alex")

    new_host = Plugin("new-host", before_call=lambda c: Change(sections=["NEW HOST RULE."]))
    lm = ScriptedLM(reply=lambda request: "A5")
    with functai.settings(client=lm, lm="evaluating-model", log_calls=log, plugins=[new_host]):
        result = functai.evaluate(tutor_v2(), workers=1)
    assert len(lm.requests) == 1  # one model request in total: no summarizer, nothing else
    request = lm.requests[0]
    system = request.messages[0]["content"]
    assert system.startswith("Tutor the student, step by step (improved).")  # the current instruction
    assert "Earlier in this conversation (2 turns, summarized):\nThey covered Q1 and Q2." in system
    assert "NEW HOST RULE." in system and "OLD HOST RULE." not in system
    assert request.model == "evaluating-model"
    assert [m["content"] for m in request.messages[1:]] == ["question: Q3", "A3", "question: Q4", "A4", "question: Q5"]
    assert not any("Q1" in m["content"] or "Q2" in m["content"] for m in request.messages[1:])
    assert open_store(store).read("alex") == records_before  # no turn added, nothing written
    assert result.score == 1.0 and result.skipped == []
    (row,) = result.rows
    assert (row.inputs, row.expected, row.got, row.passed, row.record) == ({"question": "Q5"}, "A5", "A5", 1.0, fifth.id)
    new_call = next(r for r in functai.read_calls(log) if r.id == row.call)
    assert new_call.conversation is None and new_call.changes[0]["plugin"] == "new-host"


def test_a_rated_turn_is_asked_again_from_the_call_log_alone_and_left_out_only_when_both_lost_it(tmp_path):
    log, store = str(tmp_path / "calls"), str(tmp_path / "store")
    with functai.settings(client=ScriptedLM(reply=summarizing), log_calls=log):
        tutor = tutor_v1()
        chat = tutor.conversation("b", store=store)
        chat("Q1")
        chat("Q2")
        plain = tutor.run("Q9").record
    second = [r for r in functai.read_calls(log) if r.conversation and r.inputs == {"question": "Q2"}][0]
    assert second.conversation["shown"] == {"last": 1}  # small: the content is in that turn's own record
    functai.rate(second, good=True, log=log)
    functai.rate(plain, good=False, correction="A9!", log=log)
    path = tmp_path / "store" / "b.jsonl"
    first_turn = chat.turns[0].id
    kept = [line for line in path.read_text().splitlines() if json.loads(line).get("turn") != first_turn]
    path.write_text("\n".join(kept) + "\n")  # the store lost the turn it was shown: the log still has it
    lm = ScriptedLM(reply=lambda r: "A2" if "Q2" in r.messages[-1]["content"] else "A9!")
    with functai.settings(client=lm):
        result = functai.evaluate(tutor, log=log, workers=1)
    assert result.skipped == [] and [r.record for r in result.rows] == [second.id, plain.id]
    assert [m["content"] for m in lm.requests[0].messages[1:]] == ["question: Q1", "A1", "question: Q2"]

    calls = tmp_path / "calls" / "calls.jsonl"  # now the log loses it too: nothing can show it as it was
    lines = [line for line in calls.read_text().splitlines()
             if (json.loads(line).get("conversation") or {}).get("turn") != first_turn]
    calls.write_text("\n".join(lines) + "\n")
    with functai.settings(client=ScriptedLM(reply=lambda r: "A9!")):
        with log_events() as logged:
            result = functai.evaluate(tutor, log=log, workers=1)
        assert logged.named("left out")
    assert [call for call, _ in result.skipped] == [second.id]
    assert "no longer in the conversation" in result.skipped[0][1]
    assert [(r.record, r.expected, r.passed) for r in result.rows] == [(plain.id, "A9!", 1.0)]


def test_a_turn_of_a_memory_store_is_asked_again_in_a_later_process(tmp_path):
    import os
    import subprocess
    import sys
    import textwrap

    (tmp_path / "lessons.py").write_text(textwrap.dedent('''
        import functai

        @functai.ai
        def tutor(question: str) -> str:
            """Tutor the student."""
    '''))
    log = str(tmp_path / "calls")
    program = textwrap.dedent(f'''
        import functai, lessons
        from functai.testing import ScriptedLM
        functai.configure(client=ScriptedLM(["A1", "A2"]), log_calls={log!r})
        chat = lessons.tutor.conversation("m")  # a memory store: gone when this process ends
        chat("Q1")
        chat("Q2")
        for record in functai.read_calls({log!r}):
            functai.rate(record, good=True, log={log!r})
    ''')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()])}
    subprocess.run([sys.executable, "-c", program], check=True, env=env)
    sys.path.insert(0, str(tmp_path))
    try:
        import lessons

        lm = ScriptedLM(reply=lambda r: "A" + r.messages[-1]["content"][-1])
        with functai.settings(client=lm):
            result = functai.evaluate(lessons.tutor, log=log, workers=1)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("lessons", None)
    assert (len(result.rows), result.skipped, result.score) == (2, [], 1.0)
    assert [m["content"] for m in lm.requests[1].messages[1:]] == ["question: Q1", "A1", "question: Q2"]


def test_without_content_a_turn_shown_nothing_is_still_refused(tmp_path):
    log = str(tmp_path / "calls")
    with functai.settings(client=ScriptedLM(["A1", "A2"]), log_calls=log, log_content=False):
        chat = tutor_v1().conversation("h")
        chat("Q1")
        chat("Q2")
    second = list(functai.read_calls(log))[-1]
    functai.rate(second, good=True, log=log)
    with log_events() as logged:
        result = functai.evaluate(tutor_v1(), log=log, workers=1, rows=None)
    assert logged.named("left out")
    assert result.rows == [] and "without content" in result.skipped[0][1]


def test_ratings_latest_by_the_same_person_wins_and_unknown_calls_are_refused(tmp_path):
    log = str(tmp_path)
    with functai.settings(client=ScriptedLM(["A1"]), log_calls=log):
        record = tutor_v1().run("Q1").record
    functai.rate(record, good=True, by="ann", log=log)
    functai.rate(record.id, good=False, correction="better", by="ann", log=log)
    functai.rate(record.id, good=True, by="bob", log=log)
    ratings = functai._evaluation.read_ratings(log)[record.id]
    assert [(r.by, r.good, r.correction) for r in ratings] == [("ann", False, "better"), ("bob", True, None)]
    (rated,) = functai.read_calls(log, rated=True, function="test_evaluation:tutor")
    assert rated.id == record.id and rated.rating["by"] == "bob"
    with pytest.raises(FunctAIError) as info:
        functai.rate("no-such-call", good=True, log=log)
    assert info.value.code == "unknown-call"
    with pytest.raises(FunctAIError) as info:
        functai.rate(record, good=True)
    assert info.value.code == "no-call-log"


def test_given_rows_a_metric_and_parallel_workers():
    import threading

    # The first two model calls of each evaluation wait until both are inside
    # at once (bounded): that can only happen when two workers run together,
    # so the proof does not depend on how the scheduler happens to interleave.
    gate: dict = {}
    broken: list[str] = []

    def open_gate() -> None:
        gate.update(barrier=threading.Barrier(2, timeout=10), arrived=0, threads=set(), lock=threading.Lock())

    def reply(request):
        with gate["lock"]:
            gate["arrived"] += 1
            waits = gate["arrived"] <= 2
        if waits:
            try:
                gate["barrier"].wait()
                gate["threads"].add(threading.get_ident())
            except threading.BrokenBarrierError:
                broken.append(request.messages[-1]["content"])
        text = request.messages[-1]["content"]
        return str(len(text.removeprefix("text: ").split()))

    @ai
    def count(text: str) -> int:
        """Count the words."""

    rows = [({"text": "a b"}, 2), ({"text": "a b c"}, 3), ({"text": "a"}, 5), {"inputs": {"text": "x y z w"}, "expected": 4}]
    with functai.settings(client=ScriptedLM(reply=reply)):
        open_gate()
        result = functai.evaluate(count, rows, workers=3)
        assert not broken and len(gate["threads"]) == 2, "two rows were never asked at once with workers=3"
        open_gate()
        close = functai.evaluate(count, rows, metric=lambda expected, got: 1 - abs(expected - got) / 10, workers=2)
        assert not broken and len(gate["threads"]) == 2, "two rows were never asked at once with workers=2"
    assert [r.passed for r in result.rows] == [1.0, 1.0, 0.0, 1.0]
    assert result.score == 0.75 and result.interval[0] < 0.75 < result.interval[1]
    assert [r.got for r in result.rows] == [2, 3, 1, 4] and all(r.call for r in result.rows)
    assert close.score == pytest.approx((1 + 1 + 0.6 + 1) / 4)


def test_workers_see_the_callers_settings_blocks():
    @ai
    def echo(text: str) -> str:
        """Echo."""

    lm = ScriptedLM(reply=lambda request: request.messages[-1]["content"].removeprefix("text: "))
    with functai.settings(client=lm, temperature=0.3):
        functai.evaluate(echo, [({"text": str(i)}, str(i)) for i in range(6)], workers=3)
    assert {r.settings.get("temperature") for r in lm.requests} == {0.3}


def test_optimize_picks_the_better_of_two_candidate_instructions():
    @ai
    def sentiment(text: str) -> str:
        """Classify."""

    def reply(request):
        system = request.messages[0]["content"]
        if system.startswith("Propose improved instructions"):
            return json.dumps(["Say the sentiment.", "Say the sentiment in one lower-case word: good or bad."])
        text = request.messages[-1]["content"]
        if system.startswith("Say the sentiment in one lower-case word"):
            return "good" if "love" in text else "bad"
        if system.startswith("Say the sentiment."):
            return "Good!" if "love" in text else "bad"
        return "unsure"

    rows = [({"text": "I love it"}, "good"), ({"text": "I hate it"}, "bad")]
    with functai.settings(client=ScriptedLM(reply=reply)):
        result = functai.optimize(sentiment, rows, teacher_lm="teacher-model", candidates=2, workers=1)
    assert result.scores == [
        ("Classify.", 0.0),
        ("Say the sentiment.", 0.5),
        ("Say the sentiment in one lower-case word: good or bad.", 1.0),
    ]
    best = result.best
    assert best.instruction == "Say the sentiment in one lower-case word: good or bad."
    assert best.version != sentiment.version and best.__name__ == "sentiment"
    with functai.settings(client=ScriptedLM(reply=reply)):
        assert best(text="I love it") == "good"


def test_the_cli_rates_and_evaluates(tmp_path, monkeypatch, capsys, durable_log):
    import sys

    from functai._cli import main

    (tmp_path / "quiz.py").write_text(
        "import functai\n\n@functai.ai\ndef capital(country: str) -> str:\n    '''The capital city.'''\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("quiz", None)
    import quiz

    log = durable_log
    with functai.settings(client=ScriptedLM(["Lima", "Paris?"]), log_calls=log):
        lima = quiz.capital.run("Peru").record
        paris = quiz.capital.run("France").record
    assert main(["rate", lima.id[:8], "--good", "--by", "ann", "--log", log]) == 0
    assert main(["rate", paris.id, "--bad", "--correction", "Paris", "--log", log]) == 0
    assert capsys.readouterr().out.splitlines() == [f"rated {lima.id} good (by ann)", f"rated {paris.id} bad, correction Paris"]
    assert main(["rate", "nope", "--good", "--log", log]) == 2  # an id that names no call: a command-line mistake
    functai.configure(client=ScriptedLM(reply=lambda r: "Lima" if "Peru" in r.messages[-1]["content"] else "Paris"))
    assert main(["evaluate", "quiz:capital", "--log", log, "--workers", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("score 1.000") and "2 rows, 0 skipped" in out[0]
    assert out[1].split()[:2] == ["pass", "country=Peru"] and out[2].split()[:2] == ["pass", "country=France"]
    sys.modules.pop("quiz", None)


class _Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_the_cli_draws_the_progress_bar_on_the_err_stream_it_is_given(tmp_path, monkeypatch):
    import sys

    from functai._cli import main

    (tmp_path / "quiz2.py").write_text(
        "import functai\n\n@functai.ai\ndef capital(country: str) -> str:\n    '''The capital city.'''\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("quiz2", None)
    import quiz2

    log = str(tmp_path / "log")
    with functai.settings(client=ScriptedLM(["Lima", "Paris"]), log_calls=log):
        functai.rate(quiz2.capital.run("Peru").record, good=True, log=log)
        functai.rate(quiz2.capital.run("France").record, good=True, log=log)
    monkeypatch.setattr(sys, "stderr", _Terminal())  # a terminal the bar must not go to
    out, err = io.StringIO(), _Terminal()
    with functai.settings(client=ScriptedLM(reply=lambda r: "Lima" if "Peru" in r.messages[-1]["content"] else "Paris")):
        assert main(["evaluate", "quiz2:capital", "--log", log, "--workers", "1"], out=out, err=err) == 0
    assert out.getvalue().startswith("score 1.000")
    assert err.getvalue().startswith("\revaluating capital [") and err.getvalue().endswith("] 2/2\n")
    assert sys.stderr.getvalue() == ""
    sys.modules.pop("quiz2", None)


def test_evaluate_draws_its_progress_bar_where_it_is_told_and_only_on_a_terminal():
    @ai
    def echo(text: str) -> str:
        """Say it back."""

    rows = [({"text": "a"}, "a"), ({"text": "b"}, "b")]
    with functai.settings(client=ScriptedLM(reply=lambda r: r.messages[-1]["content"].split()[-1])):
        terminal, pipe, forced = _Terminal(), io.StringIO(), io.StringIO()
        functai.evaluate(echo, rows, workers=1, progress_to=terminal)
        functai.evaluate(echo, rows, workers=1, progress_to=pipe)
        functai.evaluate(echo, rows, workers=1, progress_to=forced, progress=True)
    assert terminal.getvalue().endswith("] 2/2\n") and forced.getvalue() == terminal.getvalue()
    assert pipe.getvalue() == ""


def test_a_call_whose_request_was_replaced_is_a_row_but_never_a_worked_example(tmp_path):
    import attrs

    log = str(tmp_path)
    swap = Plugin("swap", request=lambda e: attrs.evolve(e.request, model="other"))
    with functai.settings(client=ScriptedLM(["A1", "A2"]), log_calls=log):
        tutor = tutor_v1()
        plain = tutor.run("Q1").record
        with functai.settings(plugins=[swap]):
            hidden = tutor.run("Q2").record
    assert hidden.replayable is False
    functai.rate(plain, good=True, log=log)
    functai.rate(hidden, good=True, log=log)
    seen = []

    def reply(request):
        system = request.messages[0]["content"]
        if system.startswith("Propose improved instructions"):
            seen.append(request.messages[-1]["content"])
            return json.dumps([])
        return "A" + request.messages[-1]["content"].removeprefix("question: Q")

    with functai.settings(client=ScriptedLM(reply=reply)):
        result = functai.optimize(tutor, log=log, workers=1)
    assert [row.record for row in result.baseline.evaluation.rows] == [plain.id, hidden.id]  # both asked
    assert "Q1" in seen[0] and "Q2" not in seen[0]  # only one is shown to the teacher


def test_a_torn_last_line_never_swallows_the_next_rating(tmp_path):
    log = str(tmp_path)
    with functai.settings(client=ScriptedLM(["A1", "A2"]), log_calls=log):
        one, two = tutor_v1().run("Q1").record, tutor_v1().run("Q2").record
    functai.rate(one, good=True, log=log)
    with open(tmp_path / "ratings.jsonl", "a") as handle:
        handle.write('{"call": "torn", "go')  # a crash mid-write
    functai.rate(two, good=False, log=log)
    with log_events() as caught:
        assert set(functai._evaluation.read_ratings(log)) == {one.id, two.id}
    assert caught.messages == [
        f"functai: log line skipped: at={tmp_path / 'ratings.jsonl'}:2 reason=a write cut short "
        "(a crash while writing), with the next line caught on it; that line was written again"
    ]  # no lock (functai._appendlog): the next line, landed on the torn piece, was written again after it


def test_a_rated_turn_whose_store_cannot_be_opened_is_left_out_not_the_end_of_the_run(tmp_path):
    from functai._stores.opening import forget

    log, store = str(tmp_path / "calls"), "sqlite:///" + str(tmp_path / "conv.db")
    functai.configure(client=ScriptedLM(["A1", "A2", "A3", "A4", "A5"]))
    tutor = tutor_v1()
    chat = tutor.conversation("c", store=store)
    chat("q1")
    chat("q2")
    functai.configure(log_calls=log)  # the turns it is shown are only in the store
    chat("q3")
    _, plain = tutor.run("q4")
    turn_call = [r for r in functai.read_calls(log) if r.conversation][-1]
    functai.rate(turn_call, good=True, log=log)
    functai.rate(plain, good=True, log=log)
    forget(store)
    (tmp_path / "conv.db").write_bytes(b"not a database" * 100)
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"conv.db{suffix}").unlink(missing_ok=True)
    result = functai.evaluate(tutor, log=log)
    assert len(result.rows) == 1 and [call for call, _ in result.skipped] == [turn_call.id]
    assert result.skipped[0][1].startswith("store-io")
    forget(store)
