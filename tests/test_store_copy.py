"""``functai store copy`` and ``functai calls copy``: folder → SQLite → PostgreSQL → folder, byte for byte."""

from __future__ import annotations

import io

import pytest

import functai
from functai import FunctAIError, ai
from functai._cli import main
from functai._stores import open_store
from functai._stores.copy import copy_conversations
from functai.testing import ScriptedLM


@ai
def tutor(question: str) -> str:
    """Tutor the student."""


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def files(folder):
    """The folder's files, but a call log's index (made from the log when it is read)."""
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.name != "calls.index.sqlite"}


def test_a_round_trip_through_sqlite_and_postgresql_keeps_every_byte(tmp_path, postgres_url):
    start, log = tmp_path / "start", tmp_path / "calls"
    with functai.settings(client=ScriptedLM(reply=lambda r: "réponse ✓ " + r.messages[-1]["content"][-2:]),
                          log_calls=str(log)):
        chat = tutor.conversation("alex", store=str(start))
        chat("What is ½?")
        chat("And \u2028 line separators, \"quotes\", \\ and 1e16?")
        chat.continue_from(chat.turns[0])("a branch")
        chat.remember("notes", "mode", {"careful": True, "n": 3.25})
        tutor.conversation("bo.2", store=str(start))("hello")
    calls = list(functai.read_calls(str(log)))
    functai.rate(calls[0], good=True, by="ann", log=str(log))
    functai.rate(calls[1], good=False, correction="Un demi.", log=str(log))
    sqlite = "sqlite:///" + str(tmp_path / "middle.db")
    back, back_log = tmp_path / "back", tmp_path / "back-calls"

    for source, target in ((str(start), sqlite), (sqlite, postgres_url), (postgres_url, str(back))):
        status, out, err = run("store", "copy", source, target)
        assert status == 0, err
        assert "copied 2 conversations" in out
    for source, target in ((str(log), sqlite), (sqlite, postgres_url), (postgres_url, str(back_log))):
        status, out, err = run("calls", "copy", source, target)
        assert status == 0, err
        assert f"copied {len(calls)} calls and 2 ratings" in out

    assert files(back) == files(start)  # the same files, the same bytes
    assert files(back_log) == files(log)
    assert open_store(postgres_url).conversations() == ["alex", "bo.2"]
    assert [r.id for r in functai.read_calls(postgres_url, rated=True)] == [calls[0].id, calls[1].id]

    status, out, _ = run("store", "copy", str(start), sqlite)  # again: nothing is missing, nothing added
    assert status == 0 and "alex: 0 records copied" in out
    assert run("calls", "copy", str(log), sqlite)[1].startswith("copied 0 calls and 0 ratings")


def test_a_copy_never_overwrites_a_different_conversation(tmp_path):
    source, target = str(tmp_path / "a"), "sqlite:///" + str(tmp_path / "b.db")
    open_store(source).append("c", [{"n": 0}, {"n": 1}])
    open_store(target).append("c", [{"n": 0}, {"other": True}])
    with pytest.raises(FunctAIError) as info:
        copy_conversations(source, target)
    assert info.value.code == "store-copy"
    assert open_store(target).read("c") == [{"n": 0}, {"other": True}]
    status, _, err = run("store", "copy", source, target)
    assert status == 2 and "[store-copy]" in err
    status, _, err = run("store", "copy", source, source)
    assert status == 2 and "same store" in err
    status, _, err = run("store", "copy", str(tmp_path / "missing"), target)
    assert status == 2 and "not-found" in err
    status, _, err = run("calls", "copy", str(tmp_path / "a"))
    assert status == 2 and "SRC and DST" in err
