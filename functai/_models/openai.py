"""A client for OpenAI-compatible chat-completions servers (OpenAI, Ollama, vLLM, llama.cpp,
LM Studio; Azure in `functai._models.azure`), over httpx.

Secrets stay behind handles (`functai._models.keys`) until a request is sent and are scrubbed
from every server text. One exchange (post, retry, fall back to a weaker output format, read)
is written once, as steps without I/O (`OpenAIClient._exchange`) that `_drive` or `_adrive` performs.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import functools
import hashlib
import math
import os
import random
import re
import threading
import time
from contextlib import aclosing, closing
from typing import Any, AsyncIterator, Callable, Generator, Iterator, Mapping

import httpx

from functai._errors import ModelError
from functai._log import info
from functai._version import __version__
from functai._models.answers import Assembler, Reader
from functai._models.endpoint import Endpoint, sent_headers
from functai._models.keys import (
    Key,
    hide_headers,
    is_secret_header,
    refuse_unsendable,
    refuse_url_credentials,
    reveal,
    reveal_headers,
)
from functai._models.loops import LoopClients
from functai._models.catalog import PROVIDERS
from functai._models.request import Reply, Request
from functai._models.wire import FORMATS, build_body, qualifies_strict

__all__ = ["OpenAIClient", "DEFAULT_BASE_URL", "RETRY_STATUSES"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"

#: Longest wait, in seconds, honoured from a server's ``Retry-After`` or taken as a backoff step.
MAX_RETRY_AFTER = MAX_BACKOFF = 30.0
#: Statuses worth asking again (and every 5xx).
RETRY_STATUSES = frozenset({408, 409, 429})
#: OpenAI models that refuse ``max_tokens`` (reasoning models).
_COMPLETION_TOKENS_MODELS = re.compile(r"(o\d|gpt-5)")

# What each server accepted, for the process: base URL → index into FORMATS; (base URL, model) pairs
# that want max_completion_tokens.
_formats: dict[str, int] = {}
_completion_tokens: set[tuple[str, str]] = set()


class _SecretHeaders(httpx.Auth):
    """Puts the secret headers on each request as it is sent; shows none of them."""

    def __init__(self, headers: Mapping[str, Key]) -> None:
        self._headers = headers

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers.update(reveal_headers(self._headers))
        yield request

    def __repr__(self) -> str:
        return "<secret headers>"


class OpenAIClient:
    """Answers `Request`s through an OpenAI-compatible ``/chat/completions`` endpoint, with one
    pooled `httpx.Client` and one `httpx.AsyncClient` per event loop. A built-in provider's ``name``
    gives the variables read when ``api_key`` or ``base_url`` is not set (`PROVIDERS`)."""

    name: str

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | Key | None = None,
        timeout: float = 60.0,
        connect_timeout: float | None = None,
        max_retries: int = 2,
        backoff: float = 0.5,
        name: str = "openai",
        transport: httpx.BaseTransport | None = None,
        api_key_env: str | None = None,
        base_url_env: str | None = None,
        headers: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        for what, least in (("max_retries", max_retries), ("backoff", backoff)):
            if least < 0:
                raise ValueError(f"{what} must be 0 or more, got {least}")
        for what, seconds in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if seconds is not None and not seconds > 0:
                raise ValueError(f"{what} must be positive, got {seconds}")
        known = PROVIDERS.get(name)  # a built-in provider: its variables and server, unless given others
        if known is not None:
            api_key_env = known.api_key_env if api_key_env is None else api_key_env
            base_url_env = known.base_url_env if base_url_env is None else base_url_env
        url = (base_url or (os.environ.get(base_url_env) if base_url_env else None)
               or (known.base_url if known else None) or self._default_base_url())
        refuse_url_credentials(url, f"the base URL of {name}")
        #: Where requests go; ``/chat/completions`` is appended.
        self.base_url: str = url.rstrip("/")
        self.name = name
        key = reveal(api_key)
        if key is not None:
            self._key_from: str | None = "the api_key setting"
        else:
            key = os.environ.get(api_key_env) if api_key_env else None
            self._key_from = api_key_env if key else None
        self._key_env = api_key_env
        sent = {"Accept": "application/json"}
        if key:  # an empty key means "none": local servers want no Authorization header
            header, value = self._auth(key)
            sent[header] = value
        for header, variable in (("OpenAI-Organization", "OPENAI_ORG_ID"), ("OpenAI-Project", "OPENAI_PROJECT_ID")):
            if name == "openai" and os.environ.get(variable):
                sent[header] = os.environ[variable]
        sent.update(reveal_headers(headers or {}))  # yours win
        for header, value in sent.items():
            what = f"the API key ({self._key_from})" if key and key in value else f"the {header} header"
            refuse_unsendable(value, what)
        self._asker = hashlib.sha256(sent_headers(sent)).digest()  # who asks, one way: for `endpoint`
        if not any(header.lower() == "user-agent" for header in sent):  # yours wins; ours is not part of who
            sent = {"User-Agent": f"functai/{__version__}", **sent}  # asks, so an upgrade keeps the cache's keys
        self._headers = hide_headers(sent)  # the key's and the secret-named ones behind handles
        secrets = [value for header, value in sent.items() if is_secret_header(header)]
        self._reader = Reader(f"{name} at {self.base_url}", [key, *secrets] if key else secrets)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self._transport = transport
        self._pools = LoopClients()  # event loop → its httpx.AsyncClient (a pool belongs to one loop)
        self._sleep = sleep
        self._random = random.Random()
        self._http: httpx.Client | None = None
        self._lock = threading.Lock()

    def _default_base_url(self) -> str:
        return DEFAULT_BASE_URL

    @functools.cached_property
    def endpoint(self) -> Endpoint:
        """Who answers this client's requests: its provider, server and (hashed) headers."""
        return Endpoint(self.name, self._url("{model}"), secret=self._asker)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r})"

    def __enter__(self) -> OpenAIClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the pooled connections (each event loop's on that loop, once it runs)."""
        with self._lock:
            http, self._http = self._http, None
        if http is not None:
            http.close()
        self._pools.close()

    async def aclose(self) -> None:
        """Close the pools: this event loop's awaited, the others' on their own loops."""
        await self._pools.aclose()
        self.close()

    async def __aenter__(self) -> OpenAIClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _auth(self, key: str) -> tuple[str, str]:
        """The header that carries the key."""
        return "Authorization", f"Bearer {key}"

    def _options(self) -> dict[str, Any]:
        # Secret headers go on each request through an auth object, not into the pooled
        # client's default headers, which show in its repr (tracebacks that print locals).
        secret = {name: value for name, value in self._headers.items() if isinstance(value, Key)}
        headers = {name: value for name, value in self._headers.items() if name not in secret}
        return {"headers": headers, "auth": _SecretHeaders(secret) if secret else None, "follow_redirects": False,
                "timeout": httpx.Timeout(self.timeout, connect=self.connect_timeout or self.timeout)}

    def _client(self) -> httpx.Client:
        with self._lock:
            if self._http is None:
                self._http = httpx.Client(transport=self._transport, **self._options())
            return self._http

    def _aclient(self) -> httpx.AsyncClient:
        """The pooled `httpx.AsyncClient` of the running event loop."""
        return self._pools.get(self._new_aclient)

    def _new_aclient(self) -> httpx.AsyncClient:
        from functai._models.pool import lean_transport

        return httpx.AsyncClient(transport=lean_transport(), **self._options())

    def _url(self, model: str) -> str:
        return f"{self.base_url}/chat/completions"

    def _wants_completion_tokens(self, model: str) -> bool:
        known = (self.base_url, model) in _completion_tokens
        return known or (self.name == "openai" and _COMPLETION_TOKENS_MODELS.match(model) is not None)

    def complete(self, request: Request) -> Reply:
        """Send `request`, retrying transient failures, and read the reply."""
        return self._drive(self._exchange(request, False))  # type: ignore[no-any-return]

    async def acomplete(self, request: Request) -> Reply:
        """`complete` over the event loop's pooled `httpx.AsyncClient`."""
        return await self._adrive(self._exchange(request, False))  # type: ignore[no-any-return]

    def stream(self, request: Request) -> Iterator[Any]:
        """Each text delta as it arrives (``str``), then the whole `Reply`."""
        response, wrapped = self._drive(self._exchange(request, True))
        assembler, shown = Assembler(self._reader.excerpt), self._reader.text_scrub()
        with closing(response), self._reader.cuts():
            for line in response.iter_lines():
                if (text := assembler.line(line)) and (text := shown.feed(text)):
                    yield text
            if (text := assembler.end()) and (text := shown.feed(text)):
                yield text
            if text := shown.rest():
                yield text
            yield self._reader.assembled(assembler.answer(), wrapped)

    async def astream(self, request: Request) -> AsyncIterator[Any]:
        """`stream` over the event loop's pooled `httpx.AsyncClient`."""
        response, wrapped = await self._adrive(self._exchange(request, True))
        assembler, shown = Assembler(self._reader.excerpt), self._reader.text_scrub()
        async with aclosing(response):
            with self._reader.cuts():
                async for line in response.aiter_lines():
                    if (text := assembler.line(line)) and (text := shown.feed(text)):
                        yield text
                if (text := assembler.end()) and (text := shown.feed(text)):
                    yield text
                if text := shown.rest():
                    yield text
                yield self._reader.assembled(assembler.answer(), wrapped)

    def _drive(self, steps: Generator[Any, Any, Any]) -> Any:
        try:
            step = next(steps)
            while True:
                step = _resume(steps, self._perform(step))
        except StopIteration as done:
            return done.value

    async def _adrive(self, steps: Generator[Any, Any, Any]) -> Any:
        try:
            step = next(steps)
            while True:
                step = _resume(steps, await self._aperform(step))
        except StopIteration as done:
            return done.value

    def _perform(self, step: tuple[Any, ...]) -> Any:
        """A step's result, or the error it raised (handed back to the steps, which decide)."""
        try:
            if step[0] == "sleep":
                return self._sleep(step[1])
            http = self._client()
            response = http.send(http.build_request("POST", _parsed(step[1]), json=step[2]), stream=step[3])
            if step[3] and not response.is_success:
                response.read()  # the server's error text, for the message
            return response
        except BaseException as error:  # noqa: BLE001
            return error

    async def _aperform(self, step: tuple[Any, ...]) -> Any:
        """`_perform` with the event loop's pooled `httpx.AsyncClient`."""
        try:
            if step[0] == "sleep":
                return await asyncio.sleep(step[1])
            http = self._aclient()
            request = http.build_request("POST", _parsed(step[1]), json=step[2])
            response = await http.send(request, stream=step[3])
            if step[3] and not response.is_success:
                await response.aread()
            return response
        except BaseException as error:  # noqa: BLE001
            return error

    def _exchange(self, request: Request, stream: bool) -> Generator[Any, Any, Any]:
        """The reply to `request` (or, streaming, the open response and whether the value is wrapped)."""
        schema = request.output_schema is not None
        start = _formats.get(self.base_url, 0) if schema else 0
        level = start
        rename = "max_tokens" in request.settings and self._wants_completion_tokens(request.model)
        first_error: ModelError | None = None
        url = self._url(request.model)
        while True:
            body, wrapped = build_body(request, format=FORMATS[level], max_completion_tokens=rename)
            if stream:
                body["stream"] = True
                body["stream_options"] = {"include_usage": True}
            try:
                response = yield from self._attempts(url, body, stream)
            except ModelError as error:
                if error.status not in (400, 422):
                    raise
                if not rename and "max_tokens" in body and "max_completion_tokens" in error.message:
                    rename = True
                    _completion_tokens.add((self.base_url, request.model))
                    continue
                if schema and level + 1 < len(FORMATS):
                    first_error = first_error or error
                    level += 1
                    if FORMATS[level] == "json_schema_loose" and not qualifies_strict(request.output_schema or {}):
                        level += 1  # its strict: false body was the one just refused
                    continue
                raise (first_error or error) from None
            if level != start:
                _formats[self.base_url] = level
            if stream:
                return response, wrapped
            return self._reader.reply(self._reader.json(response), wrapped)

    def _attempts(self, url: str, body: dict[str, Any], stream: bool) -> Generator[Any, Any, httpx.Response]:
        """Post until a success (retrying transient failures); the successful response."""
        attempts = self.max_retries + 1
        last: httpx.Response | httpx.TransportError | None = None  # the last failure
        for attempt in range(attempts):
            if attempt:
                delay = self._delay(attempt - 1, last)
                why = (f"HTTP {last.status_code}" if isinstance(last, httpx.Response)
                       else self._reader.scrub(f"{type(last).__name__}: {last}"))
                info("model request retried", server=self._reader.where, attempt=attempt + 1, of=attempts,
                     after=f"{delay:.2f}s", reason=why)
                yield ("sleep", delay)
            try:
                response = yield ("post", url, body, stream)
            except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:  # retrying will not mend a bad URL
                raise ModelError(
                    self._reader.scrub(f"cannot reach {self._reader.where}: invalid base URL ({exc})"),
                    code="model-unreachable",
                ) from None
            except httpx.TransportError as exc:
                last = exc
                continue
            except httpx.DecodingError as exc:  # a body its Content-Encoding does not decode
                raise ModelError(self._reader.scrub(f"{self._reader.where} answered a body that cannot be "
                                                    f"decoded ({exc})"), code="model-protocol") from None
            status = response.status_code
            if response.is_success:
                return response  # type: ignore[no-any-return]
            if status in RETRY_STATUSES or status >= 500:
                last = response
                continue
            raise ModelError(
                f"{self._reader.where} answered HTTP {status}: {self._reader.error_text(response)}{self._hint(status)}",
                code="model-http",
                status=status,
            )
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        if isinstance(last, httpx.Response):
            raise ModelError(
                f"gave up on {self._reader.where} after {tries}: "
                f"last status HTTP {last.status_code}: {self._reader.error_text(last)}",
                code="model-http",
                status=last.status_code,
            )
        kind = "timed out" if isinstance(last, httpx.TimeoutException) else "connection failed"
        detail = str(last) or type(last).__name__
        raise ModelError(
            self._reader.scrub(f"{self._reader.where} is unreachable ({kind}) after {tries}: "
                               f"{type(last).__name__}: {detail}"),
            code="model-unreachable",
        ) from None

    def _delay(self, retry: int, failure: httpx.Response | httpx.TransportError | None) -> float:
        """Seconds before retry ``retry + 1``: Retry-After, else exponential backoff, jittered so
        clients that failed together do not all come back at the same moment."""
        if isinstance(failure, httpx.Response):
            hinted = _retry_after(failure.headers)
            if hinted is not None:
                return hinted
        step: float = min(MAX_BACKOFF, self.backoff * (2**retry))
        return step * (0.5 + 0.5 * self._random.random())

    def _hint(self, status: int) -> str:
        """Where the key came from (never the key), to check after an authentication failure."""
        if status != 401:
            return ""
        if self._key_from is not None:
            return f" (the key sent to {self.name} came from {self._key_from}: check it is the right one)"
        where = f"set {self._key_env} or the api_key setting" if self._key_env else "set the api_key setting"
        return f" (no key was sent to {self.name}: {where})"


def _resume(steps: Generator[Any, Any, Any], outcome: Any) -> Any:
    """Hand a step's outcome to the steps (an error is raised where the step was yielded); the next step."""
    return steps.throw(outcome) if isinstance(outcome, BaseException) else steps.send(outcome)


@functools.lru_cache(maxsize=64)
def _parsed(url: str) -> httpx.URL:
    """`url` parsed once: httpx parses a string URL again on every request."""
    return httpx.URL(url)


def _retry_after(headers: httpx.Headers) -> float | None:
    """``retry-after-ms`` / ``Retry-After`` (seconds, or an HTTP date) in seconds, capped; None if
    absent or unreadable."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            seconds = float(raw) / scale
        except ValueError:
            if scale != 1.0:
                continue
            try:
                when = email.utils.parsedate_to_datetime(raw)
            except (TypeError, ValueError):
                continue
            if when.tzinfo is None:  # an HTTP date is in GMT
                when = when.replace(tzinfo=datetime.timezone.utc)
            seconds = max(0.0, when.timestamp() - time.time())
        if math.isfinite(seconds) and seconds >= 0:
            return min(seconds, MAX_RETRY_AFTER)
    return None

