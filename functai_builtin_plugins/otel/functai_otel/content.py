"""Prompts and replies on ``chat`` spans, as the GenAI semantic conventions shape them, for an
application that asks for them: ``otel(capture_content=True)``, or the environment variable the
GenAI instrumentations read, ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (``true``,
``span_only`` or ``span_and_event``). Off by default, and never for a call whose record keeps no
content (``log_content=False``).
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Sequence

from .names import INPUT_MESSAGES, OUTPUT_MESSAGES, SYSTEM_INSTRUCTIONS

#: The environment variable the GenAI instrumentations read to capture prompts and replies.
CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

#: The variable's values that put content on spans (it may also name events, which this plugin makes none of).
_ON = ("true", "span_only", "span_and_event")


def asked_by_environment() -> bool:
    return os.environ.get(CAPTURE_CONTENT, "").strip().lower() in _ON


def content_attributes(messages: Sequence[Mapping[str, Any]], reply: Any) -> dict[str, str]:
    """A request's messages and the reply to it as ``gen_ai.system_instructions``,
    ``gen_ai.input.messages`` and ``gen_ai.output.messages`` (JSON text, as span attributes hold it)."""
    system: list[dict[str, Any]] = []
    said: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role in ("system", "developer"):
            system.extend(_parts(message.get("content")))
        elif role == "tool":
            said.append({"role": "tool", "parts": [{"type": "tool_call_response", "id": message.get("tool_call_id"),
                                                    "response": message.get("content")}]})
        else:
            parts = _parts(message.get("content"))
            for call in message.get("tool_calls") or ():  # functai's {id, name, input}, or the wire's function form
                function = call.get("function") or {}
                parts.append({"type": "tool_call", "id": call.get("id"), "name": call.get("name", function.get("name")),
                              "arguments": call["input"] if "input" in call else _arguments(function.get("arguments"))})
            said.append({"role": role, "parts": parts})
    answer = _parts(reply.text)
    answer += [{"type": "tool_call", "id": call.id, "name": call.name, "arguments": dict(call.input)}
               for call in reply.tool_calls]
    attributes = {INPUT_MESSAGES: _json(said),
                  OUTPUT_MESSAGES: _json([{"role": "assistant", "parts": answer,
                                           "finish_reason": reply.finish_reason or "stop"}])}
    if system:
        attributes[SYSTEM_INSTRUCTIONS] = _json(system)
    return attributes


def _parts(content: Any) -> list[dict[str, Any]]:
    """A message's content as parts: text as itself; another part (an image, audio) by its type only."""
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts = []
    for piece in content:
        if isinstance(piece, Mapping) and piece.get("type") == "text":
            parts.append({"type": "text", "content": piece.get("text")})
        else:
            parts.append({"type": str(piece.get("type")) if isinstance(piece, Mapping) else "unknown"})
    return parts


def _arguments(text: Any) -> Any:
    """A tool call's arguments as data (the wire sends them as JSON text)."""
    if isinstance(text, str):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
