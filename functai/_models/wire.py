"""The chat-completions wire format: pure functions from `Request` to JSON and back.

Structured outputs come in four strengths (`FORMATS`), each tried after a server answers
400 to the one before: a strict schema, the same not strict, ``json_object`` plus the schema
in the instructions, the instructions alone.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from .request import Request

__all__ = ["FORMATS", "build_body", "content_text", "qualifies_strict", "read_arguments", "read_usage",
           "strict_schema", "unwrap_value", "wire_message", "wire_tool", "wrap_schema"]

#: How an output schema is asked for, strongest first (``json_schema_loose``: ``strict: false``).
FORMATS = ("json_schema", "json_schema_loose", "json_object", "instructions")

#: Settings that cannot override the request's own fields.
_RESERVED = frozenset({"model", "messages"})
_TOOL_CHOICE_WORDS = frozenset({"auto", "none", "required"})


def build_body(
    request: Request, *, format: str = "json_schema", max_completion_tokens: bool = False  # noqa: A002
) -> tuple[dict[str, Any], bool]:
    """The JSON body for `request`, and whether the answer schema was wrapped in ``{"value": …}``;
    ``max_completion_tokens`` sends ``max_tokens`` under that name (models that refuse ``max_tokens``)."""
    messages = [wire_message(m) for m in request.messages]
    body: dict[str, Any] = {"model": request.model, "messages": messages}
    for key, value in request.settings.items():
        if key in _RESERVED:
            continue
        if key == "max_tokens" and max_completion_tokens:
            body.setdefault("max_completion_tokens", value)
            continue
        if key == "tool_choice" and isinstance(value, str) and value not in _TOOL_CHOICE_WORDS:
            value = {"type": "function", "function": {"name": value}}  # a tool's name
        body[key] = value
    if request.tools:
        body["tools"] = [wire_tool(tool) for tool in request.tools]
    wrapped = False
    if request.output_schema is not None:
        schema, wrapped, strict = _prepared(request.output_schema)
        if format in ("json_schema", "json_schema_loose"):
            enforced = format == "json_schema" and strict is not None  # loose: the same schema, strict false
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": strict or schema, "strict": enforced},
            }
        else:
            _add_instruction(messages, schema)
        if format == "json_object":
            body["response_format"] = {"type": "json_object"}
    return body, wrapped


def qualifies_strict(output_schema: Mapping[str, Any]) -> bool:
    """Whether ``json_schema`` sends this schema with ``strict: true`` (else it is ``json_schema_loose``)."""
    return _prepared(output_schema)[2] is not None


def _add_instruction(messages: list[dict[str, Any]], schema: Mapping[str, Any]) -> None:
    """Say the schema in the system message, for servers that cannot be given it otherwise."""
    note = "Reply with only a JSON value (no other text) that matches this JSON schema:\n" + json.dumps(
        schema, ensure_ascii=False, separators=(",", ":")
    )
    first = messages[0] if messages else None
    if first is not None and first.get("role") == "system" and isinstance(first.get("content"), str):
        messages[0] = {**first, "content": f"{first['content']}\n\n{note}"}
    else:
        messages.insert(0, {"role": "system", "content": note})


# A schema is prepared once (schemas are cached per output type, so the id is stable).
_prepared_cache: dict[int, tuple[Any, tuple[dict[str, Any], bool, dict[str, Any] | None]]] = {}


def _prepared(schema: Mapping[str, Any]) -> tuple[dict[str, Any], bool, dict[str, Any] | None]:
    hit = _prepared_cache.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    wrapped_schema, wrapped = wrap_schema(schema)
    result = (wrapped_schema, wrapped, strict_schema(wrapped_schema))
    if len(_prepared_cache) >= 256:
        _prepared_cache.clear()
    _prepared_cache[id(schema)] = (schema, result)  # the schema is kept, so its id is not reused
    return result


def wire_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """One neutral message in OpenAI's format; unknown roles pass through unchanged."""
    role = message.get("role")
    if role == "tool":
        content = message.get("content")
        return {
            "role": "tool",
            "tool_call_id": message.get("tool_call_id"),
            "content": content if isinstance(content, str) else json.dumps(content),
        }
    if role == "assistant" and message.get("tool_calls"):
        return {
            "role": "assistant",
            "content": message.get("content"),
            "tool_calls": [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": json.dumps(dict(call.get("input") or {}))},
                }
                for call in message["tool_calls"]
            ],
        }
    return dict(message)


def wire_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A neutral ``{"name", "description", "parameters"}`` tool as an OpenAI function tool."""
    function: dict[str, Any] = {"name": tool["name"]}
    if tool.get("description"):
        function["description"] = tool["description"]
    function["parameters"] = tool.get("parameters") or {"type": "object", "properties": {}}
    return {"type": "function", "function": function}


def wrap_schema(schema: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """Providers want an object at the top: any other schema wrapped as ``{"value": schema}``, its
    ``$defs``/``definitions`` moved up to the wrapper so ``#/$defs/...`` refs still resolve."""
    if schema.get("type") == "object":
        return dict(schema), False
    inner = dict(schema)
    wrapper: dict[str, Any] = {
        "type": "object",
        "properties": {"value": inner},
        "required": ["value"],
        "additionalProperties": False,
    }
    for key in ("$defs", "definitions"):
        if key in inner:
            wrapper[key] = inner.pop(key)
    return wrapper, True


def unwrap_value(text: str) -> str:
    """The bare JSON of ``{"value": ...}``; the text unchanged if it is not that shape."""
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, dict) and "value" in data:
        return json.dumps(data["value"], ensure_ascii=False)
    return text


def content_text(content: Any) -> str | None:
    """Message content as text: a string, or the text parts of a list of parts."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "".join(parts) if parts else None
    return str(content)


def read_arguments(arguments: Any) -> Any:
    """Tool arguments as an object: JSON text, the object itself, ``""``, or JSON text inside a JSON string."""
    if isinstance(arguments, dict):  # some servers send the object itself
        return arguments
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}  # a tool without parameters, sent as "" by some servers
    if not isinstance(arguments, str):
        return None
    try:
        parsed = json.loads(arguments)
        if isinstance(parsed, str):  # encoded twice: a JSON string holding the JSON object
            parsed = json.loads(parsed) if parsed.strip() else {}
    except ValueError:
        return None
    return parsed


#: (details group or None, the server's name, functai's name) of each token count.
_USAGE = (
    (None, "prompt_tokens", "input_tokens"),
    (None, "completion_tokens", "output_tokens"),
    (None, "total_tokens", "total_tokens"),
    ("prompt_tokens_details", "cached_tokens", "cached_tokens"),
    ("completion_tokens_details", "reasoning_tokens", "reasoning_tokens"),
)


def read_usage(raw: Any) -> dict[str, int]:
    """Token counts in functai's names; only what the server sent."""
    usage: dict[str, int] = {}
    if not isinstance(raw, dict):
        return usage
    for group, wire, ours in _USAGE:
        counts = raw if group is None else raw.get(group)
        value = counts.get(wire) if isinstance(counts, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            usage[ours] = value
    return usage


# Keywords every server that enforces strict schemas accepts; any other sends it with strict false.
_STRICT_KEYWORDS = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "$ref",
     "$defs", "definitions", "description", "title", "default"}
)


class _NotStrict(Exception):
    pass


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """A copy of ``schema`` that qualifies for ``strict: true`` (every property required, as an
    optional one's type already allows null; no others; common keywords only), or None."""
    try:
        return _strict(schema)
    except _NotStrict:
        return None


def _strict(node: Any) -> dict[str, Any]:
    if not isinstance(node, Mapping) or not node:
        raise _NotStrict  # `{}` (any value) cannot be enforced
    if not _STRICT_KEYWORDS.issuperset(node):
        raise _NotStrict
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "default":
            continue
        if key in ("$defs", "definitions", "properties"):
            out[key] = {name: _strict(sub) for name, sub in value.items()}
        elif key == "anyOf":
            out[key] = [_strict(sub) for sub in value]
        elif key == "items":
            out[key] = _strict(value)
        elif key not in ("required", "additionalProperties"):
            out[key] = value
    kind = node.get("type")
    is_object = kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in node
    if is_object:
        if not node.get("properties") or node.get("additionalProperties", False) is not False:
            raise _NotStrict  # a free-form mapping cannot be strict
        out["required"] = list(out["properties"])
        out["additionalProperties"] = False
    elif "type" not in node and not {"anyOf", "$ref", "enum", "const"} & node.keys():
        raise _NotStrict
    return out
