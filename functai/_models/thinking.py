"""A reasoning block at the start of a reply's text (DeepSeek-R1, Qwen3, QwQ …): not the answer.

Apart from the client's reader so that the stream guards, which see the text as it streamed,
split it the same way without loading an HTTP client.
"""

from __future__ import annotations

import re

# One leading <think>…</think> or <thinking>…</thinking> block (compiled when first used).
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
