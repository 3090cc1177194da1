"""Streamed chat completions: server-sent events assembled into one reply.

The server answers ``data: {chunk}`` lines, each a delta of the message (text, tool-call
pieces by index, the finish reason), then a last chunk with the usage, then ``data: [DONE]``.
`Assembler` folds them into the message a whole answer holds, read by the same code.
"""

from __future__ import annotations

import json
from typing import Any


class StreamCut(Exception):
    """The stream ended (or broke) before the reply was complete."""


class Assembler:
    """Collects the chunks of one streamed answer."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: Any = None
        self.done = False
        #: The response's ``id`` and ``model``, as the chunks give them.
        self.response: dict[str, str] = {}

    def line(self, line: str) -> str | None:
        """Read one line of the event stream; the text delta it carries, if any."""
        if not line.startswith("data:"):
            return None  # comments, event names, ids, blank separators
        payload = line[5:].strip()
        if payload == "[DONE]":
            self.done = True
            return None
        try:
            chunk = json.loads(payload)
        except ValueError:
            raise StreamCut(f"a stream event that is not JSON: {payload[:200]!r}") from None
        if not isinstance(chunk, dict):
            return None
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for key in ("id", "model"):  # every chunk repeats them: the first is kept
            if key not in self.response and isinstance(chunk.get(key), str) and chunk[key]:
                self.response[key] = chunk[key]
        if isinstance(chunk.get("error"), (dict, str)):
            error = chunk["error"]
            said = error.get("message") if isinstance(error, dict) else error
            raise StreamCut(f"the server reported an error mid-stream: {said}")
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return None
        choice = choices[0]
        if isinstance(choice.get("finish_reason"), str):
            self.finish = choice["finish_reason"]
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return None
        for field, parts in (("reasoning_content", self.reasoning), ("reasoning", self.reasoning),
                             ("refusal", self.refusal)):
            if isinstance(delta.get(field), str):
                parts.append(delta[field])
        for piece in delta.get("tool_calls") or ():
            self._tool_piece(piece)
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.text.append(content)
            return content
        return None

    def _tool_piece(self, piece: Any) -> None:
        if not isinstance(piece, dict):
            return
        index = piece.get("index", len(self.calls))
        call = self.calls.setdefault(index, {"id": None, "name": "", "arguments": ""})
        if isinstance(piece.get("id"), str):
            call["id"] = piece["id"]
        function = piece.get("function")
        if isinstance(function, dict):
            if isinstance(function.get("name"), str):
                call["name"] += function["name"]
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                call["arguments"] += arguments
            elif isinstance(arguments, dict):
                call["arguments"] = arguments

    def answer(self) -> dict[str, Any]:
        """The whole answer, shaped as a non-streamed one (for the client's reply reader)."""
        if not self.done and self.finish is None:
            raise StreamCut("the stream ended before the reply was complete (no finish reason, no [DONE])")
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) if self.text else None}
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": call["arguments"]},
                }
                for _, call in sorted(self.calls.items())
            ]
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.refusal:
            message["refusal"] = "".join(self.refusal)
        data: dict[str, Any] = {**self.response, "choices": [{"message": message, "finish_reason": self.finish}]}
        if self.usage is not None:
            data["usage"] = self.usage
        return data
