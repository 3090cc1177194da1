"""functai's compaction plugin, written with functai's public API only.

Its ``turn_end`` handler folds old turns into a summary entry; its
``context`` handler shows the latest summary of the branch as a section and
keeps only the turns after it.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping, Sequence

import functai
from functai import Change, Plugin

__version__ = "0.1.0"
#: Where this plugin says what it survived: under functai's logger, silent until the application
#: configures logging.
log = logging.getLogger("functai.compaction")

#: ``summarize(earlier_summary_text, rows) -> text``
Summarizer = Callable[[str, Sequence[Mapping[str, Any]]], str]


def _summarizer(lm: str | None) -> Summarizer:
    """The default summarizer: an AI function, so plugins and records apply to it."""

    def summarize_conversation(earlier_summary: str, turns: list[dict[str, Any]]) -> str:
        """Summarize a conversation so it can go on without its old turns.

        Start from the earlier summary (it may be empty) and add what the new
        turns said: facts, decisions, open questions, names and numbers that
        later turns may need. Be brief and concrete; write plain prose.
        """
        raise NotImplementedError  # the model answers: the body never runs

    settings: dict[str, Any] = {"lm": lm} if lm else {}
    program = functai.ai(**settings)(summarize_conversation)
    return lambda earlier, rows: program(earlier_summary=earlier, turns=[dict(row) for row in rows])


def compaction(
    keep: int = 20,
    every: int = 10,
    summarize: Summarizer | None = None,
    lm: str | None = None,
    name: str = "compaction",
) -> Plugin:
    """A plugin that folds all but the last ``keep`` turns into a summary,
    once ``keep + every`` done turns of a branch are unsummarized."""
    for label, value, least in (("keep", keep, 0), ("every", every, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"compaction({label}=...) must be a whole number >= {least}, not {value!r}")
    summarizer = summarize if summarize is not None else _summarizer(lm)
    plugin = Plugin(name, version=__version__, description=f"compaction(keep={keep}, every={every})")

    def summary(event: Any) -> dict[str, Any] | None:
        """The branch's latest summary; one edited out of shape is none (a new one replaces it)."""
        newest = event.latest("summary")
        if newest is None:
            return None
        data = newest["data"]
        if (isinstance(data, dict) and isinstance(data.get("through"), str) and isinstance(data.get("text"), str)
                and type(data.get("turns")) is int):
            return data
        log.warning("plugin %r: the latest summary entry is damaged (%.80r); it is left out", name, data)
        return None

    @plugin.turn_end
    def fold_old_turns(turn: Any) -> None:
        if turn.state != "done":
            return
        latest = summary(turn)
        done = turn.turns()
        ids = [t.id for t in done]
        start = ids.index(latest["through"]) + 1 if latest and latest["through"] in ids else 0
        unsummarized = done[start:]
        if len(unsummarized) < keep + every:
            return
        folded = unsummarized[: len(unsummarized) - keep]
        rows = [{**t.inputs, **t.outputs} for t in folded]
        earlier = latest["text"] if latest else ""
        try:
            text = summarizer(earlier, rows)
        except Exception as error:
            log.warning("plugin %r: the summarizer failed (%s: %s); the turns stay unsummarized",
                        name, type(error).__name__, error)
            return
        if not isinstance(text, str) or not text.strip():
            log.warning("plugin %r: the summarizer returned blank text; nothing was folded", name)
            return
        turns_so_far = (latest["turns"] if latest else 0) + len(folded)
        turn.remember("summary", {"through": folded[-1].id, "text": text.strip(), "turns": turns_so_far})
        # where the summary ends, when another context handler leaves its last turn out: when that turn
        # started, and the turns then left unsummarized (one may have started in its millisecond)
        turn.remember("folded", {"through": folded[-1].id, "at": folded[-1].at,
                                 "kept": [t.id for t in unsummarized[len(folded):]]})

    @plugin.context
    def show_the_summary(context: Any) -> Change | None:
        latest = summary(context)
        if latest is None:
            return None
        ids = [t.id for t in context.turns]
        folded = context.latest("folded")
        where = folded["data"] if folded is not None and isinstance(folded["data"], dict) else {}
        if latest["through"] in ids:
            after = ids[ids.index(latest["through"]) + 1 :]
        elif where.get("through") == latest["through"] and isinstance(where.get("at"), str):  # left out elsewhere
            kept = set(where.get("kept") or ())
            after = [t.id for t in context.turns if (t.at or "") > where["at"] or t.id in kept]
        else:  # a summary kept before its "folded" entry was
            after = ids
        section = f"Earlier in this conversation ({latest['turns']} turns, summarized):\n{latest['text']}"
        return Change(keep=after, sections=[section])

    return plugin
