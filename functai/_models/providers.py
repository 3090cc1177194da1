"""Which client answers a model name: ``"<provider>/<model>"`` (a bare name is OpenAI's) goes to
the pluggy hook ``functai_client``, where the first provider plugin that returns a client wins and
the built-in OpenAI-compatible ones come last.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from typing import Any, Mapping
from urllib.parse import urlsplit

import pluggy

from .._errors import FunctAIError, ModelConfigError
from .._log import warn
from .catalog import DEFAULT_PROVIDER, PROVIDERS, TEST_MODEL
from .keys import Key, hide_key, reveal, reveal_headers
from .request import Client

providerspec = pluggy.HookspecMarker("functai.providers")
providerimpl = pluggy.HookimplMarker("functai.providers")

#: Settings a client is built from; clients are reused while these stay the same.
CLIENT_SETTINGS = ("base_url", "api_key", "timeout", "connect_timeout", "http_retries", "headers", "api_version")

#: Client settings that belong to the provider they were set for (where it is and who asks).
PROVIDER_SETTINGS = frozenset({"base_url", "api_key", "headers", "api_version"})

#: Most clients the built-in providers keep open; the least recently used is closed.
MAX_CLIENTS = 16


class ProviderSpec:
    @providerspec(firstresult=True)
    def functai_client(self, provider: str, model: str, settings: Mapping[str, Any]) -> Client | None:
        """Return a client for ``provider``'s models, or None if you do not serve it.

        ``settings`` holds those of `CLIENT_SETTINGS` that are set (``api_key`` as the key itself).
        """


class _LRU:
    """A bounded map of clients; ``close_evicted`` closes the ones that fall out."""

    def __init__(self, size: int, close_evicted: bool) -> None:
        self.size = size
        self.close_evicted = close_evicted
        self.items: OrderedDict[Any, Client] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: Any) -> Client | None:
        with self.lock:
            found = self.items.get(key)
            if found is not None:
                self.items.move_to_end(key)
        return found

    def put(self, key: Any, client: Client) -> Client:
        """Keep ``client`` (or the one another thread kept first) and return it."""
        evicted = []
        with self.lock:
            kept = self.items.setdefault(key, client)
            self.items.move_to_end(key)
            while len(self.items) > self.size:
                evicted.append(self.items.popitem(last=False)[1])
        if evicted:
            from .endpoint import forget

            for old in evicted:
                forget(old)
        if self.close_evicted:  # each client is kept under one key only: one evicted is used no more
            for old in evicted:
                _close(old)
        return kept

    def clear(self) -> list[Client]:
        with self.lock:
            items = list(self.items.values())
            self.items.clear()
        if items:
            from .endpoint import forget

            for client in items:
                forget(client)
        return items


def _close(client: Any) -> None:
    close = getattr(client, "close", None)
    if close is not None:
        close()


#: The settings a built-in client is made with, and its argument for each.
_OPTIONS = (("base_url", "base_url"), ("api_key", "api_key"), ("timeout", "timeout"),
            ("connect_timeout", "connect_timeout"), ("http_retries", "max_retries"), ("headers", "headers"))


class OpenAICompatible:
    """The built-in providers: servers that speak OpenAI chat completions, and Azure OpenAI."""

    def __init__(self) -> None:
        # One client (one connection pool) serves every model of a server.
        self._clients = _LRU(MAX_CLIENTS, close_evicted=True)

    @providerimpl(trylast=True)
    def functai_client(self, provider: str, model: str, settings: Mapping[str, Any]) -> Client | None:
        info = PROVIDERS.get(provider)
        if info is None:
            return None
        key = (provider, *sorted((k, hide_key(v) if k == "api_key" else _hashable(v)) for k, v in settings.items()))
        found = self._clients.get(key)
        if found is not None:
            return found
        options: dict[str, Any] = {"name": provider}  # the client reads the provider's row of PROVIDERS
        for setting, option in _OPTIONS:
            if settings.get(setting) is not None:
                options[option] = settings[setting]
        if provider == "azure":
            from .azure import AzureOpenAIClient

            options["api_version"] = settings.get("api_version")
            client: Client = AzureOpenAIClient(**options)
        else:
            from .openai import OpenAIClient

            client = OpenAIClient(**options)
        return self._clients.put(key, client)


def _hashable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted(value.items()))
    return value


_lock = threading.Lock()
_manager: pluggy.PluginManager | None = None
#: The ``functai.providers`` entry points that failed to load, with why: each is left out (the
#: others and the built-ins still answer) and named where a model finds no client.
failed: dict[str, str] = {}
# Every (provider, model, settings) resolved so far; the providers own (and close) the clients.
_clients = _LRU(MAX_CLIENTS, close_evicted=False)


def manager() -> pluggy.PluginManager:
    """The provider plugin manager, made (and entry points read) on first use."""
    global _manager
    with _lock:
        if _manager is None:
            pm = pluggy.PluginManager("functai.providers")
            pm.add_hookspecs(ProviderSpec)
            pm.register(OpenAICompatible(), name="openai-compatible")
            failed.clear()
            for entry_point in _entry_points():
                if pm.has_plugin(entry_point.name):  # a second distribution under one name: the first holds
                    continue
                try:
                    pm.register(entry_point.load(), name=entry_point.name)
                except KeyboardInterrupt:
                    raise
                except BaseException as error:  # an import error, a wrong object, even SystemExit
                    failed[entry_point.name] = " ".join(f"{type(error).__name__}: {error}".split())
                    warn("provider failed to load", provider=entry_point.name, reason=failed[entry_point.name])
            _manager = pm
        return _manager


def _entry_points() -> list[Any]:
    """The ``functai.providers`` entry points, by name."""
    from importlib.metadata import entry_points

    return sorted(entry_points(group="functai.providers"), key=lambda entry_point: entry_point.name)


def register_provider(plugin: object, name: str | None = None) -> None:
    """Add a provider plugin: an object or module with ``@providerimpl functai_client``."""
    manager().register(plugin, name=name)
    _clients.clear()


def split(lm: str) -> tuple[str, str]:
    """``"ollama/llama3"`` → ``("ollama", "llama3")``; a bare name is OpenAI's."""
    provider, slash, model = str(lm).partition("/")
    if not slash:
        provider, model = DEFAULT_PROVIDER, str(lm)
    if not provider.strip() or not model.strip():
        raise ModelConfigError(
            f"lm={str(lm)!r} does not name a model: write '<provider>/<model>' (e.g. 'openai/gpt-4.1-mini', "
            "'ollama/llama3') or a bare OpenAI model name",
            code="model-name",
        )
    return provider, model


def client_for(lm: str, settings: Mapping[str, Any]) -> tuple[Client, str]:
    """The client for model name ``lm`` and the model name to send it."""
    if lm == TEST_MODEL:
        return _test_model(), TEST_MODEL
    provider, model = split(lm)
    wanted = {name: settings[name] for name in CLIENT_SETTINGS if settings.get(name) is not None}
    key = (provider, model, *sorted((k, _hashable(v)) for k, v in wanted.items()))
    client = _clients.get(key)
    if client is None:
        from .endpoint import named  # with hmac: loaded when a client is first made

        client = _clients.put(key, _ask_providers(provider, model, lm, wanted))
        named(client, provider, wanted)  # who a provider plugin's client asks, when it does not say
    return client, model


@functools.lru_cache(maxsize=None)
def _test_model() -> Client:
    """The one `TestModel` every ``lm="test"`` call shares (it keeps nothing between calls)."""
    from ..testing import TestModel

    return TestModel()


def _ask_providers(provider: str, model: str, lm: str, wanted: dict[str, Any]) -> Client:
    if isinstance(wanted.get("api_key"), Key):
        wanted["api_key"] = reveal(wanted["api_key"])
    if wanted.get("headers"):
        wanted["headers"] = reveal_headers(wanted["headers"])
    hook = manager().hook.functai_client
    try:
        client = hook(provider=provider, model=model, settings=wanted)
    except FunctAIError:
        raise  # already says what to fix (a built-in client's refused base URL)
    except Exception as error:  # a provider plugin's own failure; what it says may hold the key
        from .answers import Reader

        secrets = [str(value) for value in (wanted.get("api_key"), *(wanted.get("headers") or {}).values()) if value]
        said = Reader(str(lm), secrets).excerpt(f"{type(error).__name__}: {error}")
        raise ModelConfigError(f"a provider plugin failed choosing a client for {str(lm)!r}: {said}",
                               code="model-provider") from None
    if client is None:
        broken = "".join(f"; the provider plugin {name!r} failed to load ({why})" for name, why in failed.items())
        raise ModelConfigError(
            f"no model client for provider {provider!r} (model {str(lm)!r}); install a provider "
            f"plugin for it, use a built-in provider ({', '.join(PROVIDERS)}), or pass client=...{broken}",
            code="model-provider",
        )
    return client  # type: ignore[no-any-return]  # what a provider plugin's hook returned


def close_clients() -> None:
    """Close and forget the clients made so far (their connections too)."""
    seen = {id(c): c for c in _clients.clear()}
    with _lock:
        plugins = _manager.get_plugins() if _manager is not None else ()
    for plugin in plugins:
        if isinstance(plugin, OpenAICompatible):
            for client in plugin._clients.clear():
                seen[id(client)] = client
    for client in seen.values():
        _close(client)


_DEFAULT_PORTS = {"https": 443, "http": 80}


def server_of(client: Any) -> tuple[str, int | None] | None:
    """``(host, port)`` of the client's ``base_url``, what tracing reports as the server (never a user
    or password), else None."""
    url = getattr(client, "base_url", None)
    if url.__class__ is not str:
        return None
    try:
        parts = urlsplit(url)
        host = parts.hostname
        return (host, parts.port or _DEFAULT_PORTS.get(parts.scheme)) if host else None
    except ValueError:  # a port that is not a number: no server to report
        return None
