"""Reading what an OpenAI-compatible server sent back, with no I/O: a `Reply`, or the
server's error text, with the API key and secret headers scrubbed from every text.

A streamed answer comes as server-sent events, each ``data: {chunk}`` (message deltas, then the
usage, then ``data: [DONE]``); `Assembler` folds them into the message a whole answer holds.

What the model wrote is never quoted in an error message here: a message reaches records, logs
and consoles that no stream guard has seen. A malformed answer is described by its shape instead.
"""

from __future__ import annotations

import json
from urllib.parse import quote, quote_plus
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

import httpx

from functai._errors import ModelError
from functai._models.keys import MIN_SCRUB, echoes, hide_key, reveal
from functai._models.request import Reply
from functai._models.thinking import split_reasoning
from functai._models.toolcall import ToolCall
from functai._models.wire import content_text, read_arguments, read_usage, unwrap_value

__all__ = ["Assembler", "Reader", "StreamCut", "TextScrub"]

#: Most characters of a server's error text copied into a message.
_EXCERPT = 300

class Reader:
    """Reads one server's answers: ``where`` names it in messages, ``secrets`` are scrubbed from them."""

    __slots__ = ("where", "_secrets")

    def __init__(self, where: str, secrets: Iterable[str]) -> None:
        self.where = where
        forms = [form for secret in secrets for form in echoes(secret) if len(form) >= MIN_SCRUB]
        # Each also as a JSON string escapes it (the form it takes inside a JSON answer) and as a URL
        # encodes it (an echoed header in an error page).
        texts = dict.fromkeys(text for form in forms
                              for text in (form, json.dumps(form)[1:-1], quote(form, safe=""), quote_plus(form)))
        self._secrets = tuple(hide_key(text) for text in texts)

    def scrub(self, text: str) -> str:
        """Remove the API key (and secret headers) from text a server or an exception gave us."""
        for secret in map(reveal, self._secrets):
            text = text.replace(secret, "***")
        return text

    def excerpt(self, text: str) -> str:
        # Scrub before cutting, so a cut cannot leave part of the key behind.
        text = " ".join(self.scrub(text).split())
        return text if len(text) <= _EXCERPT else text[:_EXCERPT] + "…"

    def _scrub_json(self, raw: bytes) -> bytes:
        for secret in map(reveal, self._secrets):
            raw = raw.replace(secret.encode(), b"***")
        return raw

    def _scrub_data(self, value: Any) -> Any:
        """Parsed JSON with the secrets scrubbed from every string: what escapes (``\\/``, ``\\u003d``)
        hid from a scrub of the bytes."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, list):
            return [self._scrub_data(item) for item in value]
        if isinstance(value, dict):
            return {self.scrub(key): self._scrub_data(item) for key, item in value.items()}
        return value

    def json(self, response: httpx.Response) -> Any:
        """The body of a successful whole answer, secrets scrubbed from the bytes, and where the body
        escapes any character, from the strings parsed too."""
        raw = self._scrub_json(response.content)
        try:
            data = json.loads(raw)  # UTF-8, or UTF-16 or -32, which a scrub of the bytes as UTF-8 misses
            return self._scrub_data(data) if self._secrets and (b"\\" in raw or b"\0" in raw) else data
        except (ValueError, RecursionError) as error:
            kind = response.headers.get("content-type", "no content-type")
            why = _json_error(error) if isinstance(error, ValueError) else "nested too deeply"
            raise ModelError(
                f"{self.where} answered HTTP {response.status_code} with a body that is not JSON "
                f"({len(raw)} bytes, {self.excerpt(kind)}): {why}",
                code="model-protocol",
                status=response.status_code,
            ) from None

    def assembled(self, data: Any, wrapped: bool) -> Reply:
        """A streamed answer put together, scrubbed like a whole answer's body, then read."""
        if self._secrets:
            data = self._scrub_data(data)
        return self.reply(data, wrapped)

    def text_scrub(self) -> "TextScrub":
        """A scrub for a stream's text deltas as they are shown."""
        return TextScrub(self)

    @contextmanager
    def cuts(self) -> Iterator[None]:
        """Reading a streamed answer: a broken stream raised as a `ModelError`."""
        try:
            yield
        except StreamCut as error:
            raise ModelError(self.scrub(f"{self.where} broke off its streamed reply: {error}"),
                             code=error.code) from None
        except (httpx.TransportError, httpx.StreamError) as error:
            raise ModelError(self.scrub(f"{self.where} broke off its streamed reply: {type(error).__name__}: "
                                        f"{error or 'no detail'}"), code="model-unreachable") from None
        except (httpx.DecodingError, TypeError, RecursionError) as error:  # a body or an event of no known shape
            raise ModelError(f"{self.where} streamed a reply functai cannot read ({type(error).__name__})",
                             code="model-protocol") from None

    def reply(self, data: Any, wrapped: bool) -> Reply:
        """The `Reply` a whole answer holds (``model-protocol`` where its parts have no known shape)."""
        try:
            return self._reply(data, wrapped)
        except (TypeError, AttributeError, RecursionError) as error:  # a number where a list belongs, say
            raise ModelError(f"{self.where} answered a reply functai cannot read ({type(error).__name__})",
                             code="model-protocol") from None

    def _reply(self, data: Any, wrapped: bool) -> Reply:
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ModelError(f"{self.where} answered without choices ({_shape(data)})", code="model-protocol")
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise ModelError(f"{self.where} answered a choice without a message ({_shape(choice)})",
                             code="model-protocol")
        text = content_text(message.get("content"))
        reasoning = _words(message.get("reasoning_content") or message.get("reasoning"))
        if text is not None:
            text, thought = split_reasoning(text)
            if thought is not None:
                reasoning = f"{reasoning}\n\n{thought}" if reasoning else thought
            if wrapped:
                text = unwrap_value(text)
        tool_calls = tuple(self.tool_call(i, item) for i, item in enumerate(message.get("tool_calls") or ()))
        finish = choice.get("finish_reason")
        return Reply(
            text=text,
            tool_calls=tool_calls,
            usage=read_usage(data.get("usage")),
            finish_reason=finish if isinstance(finish, str) else None,
            refusal=_words(message.get("refusal")),
            reasoning=reasoning,
            id=_words(data.get("id")),
            model=_words(data.get("model")),
        )

    def tool_call(self, index: int, item: Any) -> ToolCall:
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict):
            function = {}
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise ModelError(
                f"{self.where} answered tool call #{index} without a function name",
                code="model-protocol",
            )
        arguments = function.get("arguments")
        parsed = read_arguments(arguments)
        if not isinstance(parsed, dict):
            raise ModelError(
                f"{self.where} called tool {self.excerpt(name)!r} with arguments that are not a JSON object "
                f"({_shape(arguments)})",
                code="model-protocol",
            )
        call_id = item.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = f"call_{index}"  # llama.cpp and friends may omit ids
        return ToolCall(id=call_id, name=name, input=parsed)

    def error_text(self, response: httpx.Response) -> str:
        """The server's own error message (OpenAI shape and common variants), else an excerpt."""
        message: Any = None
        try:
            data = response.json()
        except (ValueError, RecursionError):  # not JSON, or nested deeper than it is read
            data = None
        if isinstance(data, dict):
            error = data.get("error")
            if isinstance(error, dict):
                message = error.get("message")
            elif isinstance(error, str):
                message = error
            if not isinstance(message, str):
                message = data.get("message") or data.get("detail")
        if not isinstance(message, str) and isinstance(data, (dict, list)):  # as parsed: no escape hides a key
            message = json.dumps(message if message is not None else data, ensure_ascii=False)
        if not isinstance(message, str) or not message.strip():
            message = response.text or response.reason_phrase or "(empty body)"
        return self.excerpt(message)


def _shape(value: Any) -> str:
    """What a malformed part of an answer is, without what it says: its type and size or keys."""
    if isinstance(value, dict):
        keys = ", ".join(repr(key[:40]) for key in list(value)[:12])
        return f"an object with keys {keys}" if keys else "an empty object"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    return "null" if value is None else f"a JSON {type(value).__name__}"


def _json_error(error: ValueError) -> str:
    """Where JSON text broke, without quoting it (``json`` names a position and what it expected)."""
    return error.msg if isinstance(error, json.JSONDecodeError) else "not JSON"


def _words(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


class TextScrub:
    """A stream's text deltas with the secrets scrubbed: a delta's end that may begin a secret is held
    back until the next delta shows whether it does (a key may come split across deltas)."""

    __slots__ = ("_reader", "_held")

    def __init__(self, reader: Reader) -> None:
        self._reader, self._held = reader, ""

    def feed(self, text: str) -> str:
        """What of ``text`` (after what was held) can be shown now."""
        text = self._reader.scrub(self._held + text)
        cut = len(text)
        for secret in map(reveal, self._reader._secrets):
            at = text.find(secret[0], max(0, len(text) - len(secret) + 1))
            while at != -1 and at < cut:
                if secret.startswith(text[at:]):  # the first such place holds back the most
                    cut = at
                    break
                at = text.find(secret[0], at + 1)
        self._held = text[cut:]
        return text[:cut]

    def rest(self) -> str:
        """What was held when the stream ends: no secret's start after all."""
        held, self._held = self._held, ""
        return held


class StreamCut(Exception):
    """The stream ended (or broke) before the reply was complete; ``code`` says which way."""

    def __init__(self, message: str, code: str = "model-unreachable") -> None:
        super().__init__(message)
        self.code = code


class Assembler:
    """Collects the chunks of one streamed answer."""

    def __init__(self, excerpt: Callable[[str], str] = str) -> None:
        #: How a server's words go into an error message (scrubbed and cut short, by the client's `Reader`).
        self.excerpt = excerpt
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: Any = None
        self.done = False
        #: The response's ``id`` and ``model``, as the chunks give them.
        self.response: dict[str, str] = {}
        self._data: list[str] = []  # the ``data:`` lines of the event being read
        self._event = ""  # its ``event:`` name ("error": the server's error, whatever its data's shape)
        self._started = False  # whether the stream's first line was read (a byte-order mark may lead it)

    def line(self, line: str) -> str | None:
        """Read one line of the event stream; the text delta of the event a blank line ends, if any.
        An event's data may span several ``data:`` lines, joined by newlines (the SSE standard)."""
        if not self._started:
            self._started = True
            line = line.removeprefix("\ufeff")
        if line:
            if line.startswith("data:"):
                value = line[5:]
                self._data.append(value[1:] if value.startswith(" ") else value)
            elif line == "data":
                self._data.append("")
            elif line.startswith("event:"):
                self._event = line[6:].strip()
            return None  # comments, ids
        return self.end()

    def end(self) -> str | None:
        """The event being read, ended (by a blank line, or by the stream's end): its text delta."""
        if not self._data:
            return None
        payload, self._data = "\n".join(self._data).strip(), []
        event, self._event = self._event, ""
        if event == "error":
            try:
                said = json.loads(payload)
            except ValueError:
                said = payload
            if isinstance(said, dict):
                said = said.get("error", said)
                said = said.get("message", said) if isinstance(said, dict) else said
            raise self._reported(said)
        if payload == "[DONE]":
            self.done = True
            return None
        try:
            chunk = json.loads(payload)
        except ValueError as broken:
            raise StreamCut(f"a stream event that is not JSON ({len(payload)} characters): {_json_error(broken)}",
                            code="model-protocol") from None
        if not isinstance(chunk, dict):
            return None
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for key in ("id", "model"):  # every chunk repeats them: the first is kept
            if key not in self.response and isinstance(chunk.get(key), str) and chunk[key]:
                self.response[key] = chunk[key]
        if isinstance(chunk.get("error"), (dict, str)):
            error = chunk["error"]
            raise self._reported(error.get("message") if isinstance(error, dict) else error)
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

    def _reported(self, said: Any) -> StreamCut:
        """The error the server reported mid-stream (an ``error`` event, or a chunk holding one), its
        words scrubbed and cut short."""
        return StreamCut(f"the server reported an error mid-stream: {self.excerpt(str(said))}")

    def _tool_piece(self, piece: Any) -> None:
        if not isinstance(piece, dict):
            return
        index = piece.get("index", len(self.calls))
        call = self.calls.setdefault(index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
        if isinstance(piece.get("id"), str):
            call["id"] = piece["id"]
        function, whole = piece.get("function"), call["function"]
        if isinstance(function, dict):
            if isinstance(function.get("name"), str):
                whole["name"] += function["name"]
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                whole["arguments"] += arguments
            elif isinstance(arguments, dict):
                whole["arguments"] = arguments

    def answer(self) -> dict[str, Any]:
        """The whole answer, shaped as a non-streamed one (for the client's reply reader); call
        `end` first, for a last event the stream did not end with a blank line."""
        if not self.done and self.finish is None:
            raise StreamCut("the stream ended before the reply was complete (no finish reason, no [DONE])")
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) if self.text else None}
        if self.calls:
            message["tool_calls"] = [call for _, call in sorted(self.calls.items())]
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if self.refusal:
            message["refusal"] = "".join(self.refusal)
        data: dict[str, Any] = {**self.response, "choices": [{"message": message, "finish_reason": self.finish}]}
        if self.usage is not None:
            data["usage"] = self.usage
        return data
