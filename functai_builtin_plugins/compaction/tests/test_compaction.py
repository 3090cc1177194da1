"""compaction(keep=2, every=2) over six turns, exactly as the spec's worked example."""

import functai
import pytest
from functai import Change, Plugin, ai
from functai.testing import ScriptedLM
from functai_compaction import compaction

pytestmark = pytest.mark.usefixtures("functai_isolated")  # functai's pytest plugin


@ai
def tutor(question: str) -> str:
    """Tutor the student."""


def user_questions(request):
    return [m["content"] for m in request.messages[1:-1] if m["role"] == "user"]


def test_the_worked_example():
    lm = ScriptedLM(reply=lambda request: f"A{len(lm.requests)}")
    calls = []

    def summarize(earlier, rows):
        calls.append((earlier, [row["question"] for row in rows]))
        return f"{earlier} + {'/'.join(row['question'] for row in rows)}".strip(" +")

    with functai.settings(client=lm):
        chat = tutor.conversation("w", store=functai.MemoryStore(), plugins=[compaction(keep=2, every=2, summarize=summarize)])
        for i in range(1, 5):
            chat(f"Q{i}")
        entries = chat.entries("compaction", "summary")
        t = [turn.id for turn in chat.turns]
        assert [e["data"] for e in entries] == [{"through": t[1], "text": "Q1/Q2", "turns": 2}]
        assert entries[0]["turn"] == t[3]  # kept at the turn whose end folded them
        chat("Q5")
        fifth = lm.requests[-1]
        assert fifth.messages[0]["content"] == (
            "Tutor the student.\n\nEarlier in this conversation (2 turns, summarized):\nQ1/Q2"
        )
        assert user_questions(fifth) == ["question: Q3", "question: Q4"]
        assert len(chat.entries("compaction", "summary")) == 1  # 3 unsummarized after turn 5: no fold
        chat("Q6")
        t = [turn.id for turn in chat.turns]
        assert [e["data"] for e in chat.entries("compaction", "summary")] == [
            {"through": t[1], "text": "Q1/Q2", "turns": 2},
            {"through": t[3], "text": "Q1/Q2 + Q3/Q4", "turns": 4},
        ]
        assert calls == [("", ["Q1", "Q2"]), ("Q1/Q2", ["Q3", "Q4"])]
        chat("Q7")
        assert user_questions(lm.requests[-1]) == ["question: Q5", "question: Q6"]
        assert "(4 turns, summarized):\nQ1/Q2 + Q3/Q4" in lm.requests[-1].messages[0]["content"]

        branch = chat.continue_from(chat.turns[0])
        branch("B2")
        assert branch.entries("compaction", "summary") == []
        assert "summarized" not in lm.requests[-1].messages[0]["content"]
        assert user_questions(lm.requests[-1]) == ["question: Q1"]


def test_the_default_summarizer_is_an_ai_function_recorded_in_the_turn(tmp_path):
    def reply(request):
        if request.messages[0]["content"].startswith("Summarize a conversation"):
            return "They asked about fractions."
        return "ok"

    lm = ScriptedLM(reply=reply)
    styled = Plugin("style", before_call=lambda call: Change(sections=["Be brief."]))
    with functai.settings(client=lm, log_calls=str(tmp_path), plugins=[styled]):
        chat = tutor.conversation("d", store=functai.MemoryStore(), plugins=[compaction(keep=1, every=1)])
        chat("Q1")
        chat("Q2")
    summary = chat.entries("compaction", "summary")[0]["data"]
    assert summary["text"] == "They asked about fractions." and summary["turns"] == 1
    records = list(functai.read_calls(tmp_path))
    summarizer = [r for r in records if r.function == "summarize_conversation"]
    assert len(summarizer) == 1
    assert summarizer[0].conversation == {"id": "d", "turn": chat.head.id}
    assert summarizer[0].instruction.endswith("Be brief.")  # before_call plugins apply to it
    assert summarizer[0].inputs["turns"] == [{"question": "Q1", "output": "ok"}]


@pytest.mark.parametrize("bad", [lambda e, r: "  ", lambda e, r: 1 / 0])
def test_a_failing_or_blank_summarizer_is_reported_and_the_turn_stays_done(bad, caplog):
    with functai.settings(client=ScriptedLM(reply=lambda request: "ok")):
        chat = tutor.conversation("f", store=functai.MemoryStore(), plugins=[compaction(keep=0, every=1, summarize=bad)])
        with caplog.at_level("WARNING", logger="functai.compaction"):
            chat("Q1")
    assert "plugin 'compaction'" in caplog.text
    assert chat.head.state == "done"
    assert chat.entries("compaction", "summary") == []


def test_arguments_are_checked():
    with pytest.raises(ValueError):
        compaction(keep=-1)
    with pytest.raises(ValueError):
        compaction(every=0)


def test_the_builtin_factory_resolves_to_this_distribution():
    assert repr(functai.compaction(keep=3, every=1)) == 'Plugin("compaction", 0.1.0: context, turn_end)'


def test_the_summarizer_runs_with_the_conversations_settings_and_plugins():
    def reply(request):
        return "Summary." if request.messages[0]["content"].startswith("Summarize") else "ok"

    lm = ScriptedLM(reply=reply)
    redact = Plugin("redact", before_call=lambda call: Change(sections=["Redact card numbers."]))
    chat = tutor.conversation("s", store=functai.MemoryStore(), client=lm,
                              plugins=[redact, compaction(keep=1, every=1)])
    chat("Q1")
    chat("Q2")
    summarizer = [r for r in lm.requests if r.messages[0]["content"].startswith("Summarize")]
    assert len(summarizer) == 1 and summarizer[0].messages[0]["content"].endswith("Redact card numbers.")
    assert chat.entries("compaction", "summary")[0]["data"]["text"] == "Summary."


@pytest.mark.parametrize("damage", ["garbage", None, {"text": "t", "turns": 2}, {"through": 5, "text": "t", "turns": 2},
                                    {"through": "x", "text": 123, "turns": 2}, {"through": "x", "text": "t"}])
def test_a_summary_entry_edited_out_of_shape_is_left_out_and_replaced(tmp_path, damage, caplog):
    """One damaged entry never breaks the conversation: the turns are shown as the rule picks them,
    and the next fold writes a sound summary."""
    import json

    def summarize(earlier, rows):
        return (earlier + " | " if earlier else "") + "/".join(row["question"] for row in rows)

    lm = ScriptedLM(reply=lambda request: "ok")

    @ai(client=lm)
    def tutor(question: str) -> str:
        """Tutor the student."""

    chat = tutor.conversation("c", store=str(tmp_path), plugins=[compaction(keep=2, every=2, summarize=summarize)])
    for i in range(1, 5):
        chat(f"Q{i}")
    path = tmp_path / "c.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for record in records:
        if record.get("kind") == "entry" and record.get("entry") == "summary":
            record["data"] = damage
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    chat = tutor.conversation("c", store=str(tmp_path), plugins=[compaction(keep=2, every=2, summarize=summarize)])
    with caplog.at_level("WARNING", logger="functai.compaction"):
        assert chat("Q5") == "ok" and "summarized" not in lm.requests[-1].messages[0]["content"]
    assert "summary entry is damaged" in caplog.text
    assert chat.entries("compaction", "summary")[-1]["data"]["text"] == "Q1/Q2/Q3"  # folded again from the start
    chat("Q6")
    assert "(3 turns, summarized):\nQ1/Q2/Q3" in lm.requests[-1].messages[0]["content"]


def test_a_summary_through_a_turn_another_plugin_left_out_still_hides_what_it_folded():
    """Another context handler drops the turn a summary ends at: the turns before it are summarized,
    not shown again (nor is the dropped turn), and the turns after it are shown."""
    def summarize(earlier, rows):
        return (earlier + " + " if earlier else "") + "/".join(row["question"] for row in rows)

    offtopic = Plugin("offtopic", context=lambda c: Change(
        keep=[t.id for t in c.turns if "offtopic" not in t.inputs["question"]]))
    lm = ScriptedLM(reply=lambda request: "A")
    chat = tutor.conversation("o", store=functai.MemoryStore(), client=lm,
                              plugins=[offtopic, compaction(keep=2, every=2, summarize=summarize)])
    for question in ["Q1", "Q2 offtopic", "Q3", "Q4", "Q5"]:
        chat(question)
    messages = lm.requests[-1].messages
    assert "summarized):\nQ1/Q2 offtopic" in messages[0]["content"]
    assert [m["content"] for m in messages[1:-1] if m["role"] == "user"] == ["question: Q3", "question: Q4"]
