"""Replies that are not an answer, and reasoning kept apart from the answer.

A refusal, a reply stopped by a filter or the token limit, or an empty one is no answer:
reading it as ``''`` or asking again the same way hides what happened, so `non_answer`
names each with its own error code and the call raises it without asking again.
"""

from __future__ import annotations

import re

from ..errors import NonAnswerError
from .request import Reply

__all__ = ["non_answer", "split_reasoning"]

# One leading <think>…</think> or <thinking>…</thinking> block (DeepSeek-R1, Qwen3, QwQ …).
_THINK = r"\s*<(think|thinking)>(.*?)(?:</\1>|\Z)\s*"


def split_reasoning(text: str) -> tuple[str, str | None]:
    """``(answer, reasoning)``: a reasoning block at the start of ``text`` taken out (an unclosed
    one, cut while the model was thinking, is all reasoning)."""
    if "<think" not in text[:64]:
        return text, None
    match = re.match(_THINK, text, re.DOTALL)
    if match is None:
        return text, None
    return text[match.end():], match.group(2).strip()


def non_answer(reply: Reply, typed: bool) -> NonAnswerError | None:
    """The error for a reply that is not an answer, or None for an answer (or tool calls).

    ``typed``: the function's output is not ``str``, so a cut reply cannot be read.
    """
    finish = reply.finish_reason
    if finish == "content_filter":
        return NonAnswerError(
            "the server's content filter stopped the reply (finish_reason 'content_filter'); asking again the "
            "same way is stopped again: change the inputs or the instruction, or see the provider's content policy",
            code="model-filtered",
        )
    if reply.tool_calls:
        return None
    if reply.refusal:
        return NonAnswerError(
            f"the model refused to answer: {reply.refusal!r}; asking again the same way gets the same refusal: "
            "change the request or the instruction",
            code="model-refused",
        )
    if reply.text is None or (not reply.text.strip() and reply.reasoning):
        if reply.reasoning:
            why = f"it only reasoned ({len(reply.reasoning)} characters of reasoning, no answer)"
            fix = "raise max_completion_tokens (or max_tokens) or lower reasoning_effort"
        else:
            why = "no text and no tool call"
            fix = "check the model and the server (some servers answer null when the prompt is too long)"
        if finish == "length":
            why += ", cut at the token limit"
        return NonAnswerError(f"the model's reply is empty: {why}; {fix}", code="model-empty")
    if finish == "length" and typed:
        return NonAnswerError(
            "the reply was cut at the token limit (finish_reason 'length') before the value was complete; "
            "raise max_completion_tokens (or max_tokens): asking again would cut it at the same place",
            code="model-truncated",
        )
    return None
