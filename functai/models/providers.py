"""Which client answers a model name.

``"<provider>/<model>"`` (or a bare model name, for the ``openai`` provider)
is resolved through a pluggy hook, ``functai_client``, that provider plugins
implement: the first implementation that returns a client wins. Provider
plugins are registered with `register_provider` or found in the entry-point
group ``functai.providers`` (looked up on first use, never at import).
The OpenAI-compatible providers below are built in and asked last.
"""

from __future__ import annotations

import threading
from typing import Any, Mapping

import pluggy

from ..errors import FunctAIError
from .request import Client

providerspec = pluggy.HookspecMarker("functai.providers")
providerimpl = pluggy.HookimplMarker("functai.providers")

DEFAULT_PROVIDER = "openai"

#: Settings a client is built from; clients are reused while these stay the same.
CLIENT_SETTINGS = ("base_url", "api_key", "timeout", "http_retries")


class ProviderSpec:
    @providerspec(firstresult=True)
    def functai_client(self, provider: str, model: str, settings: Mapping[str, Any]) -> Client | None:
        """Return a client for ``provider``'s models, or None if you do not serve it.

        ``settings`` holds the call's ``base_url``, ``api_key``, ``timeout`` and
        ``http_retries`` when set.
        """


class OpenAICompatible:
    """The built-in providers: servers that speak OpenAI chat completions."""

    #: Provider name → default base URL (None: ``OPENAI_BASE_URL`` or OpenAI's).
    BASE_URLS: dict[str, str | None] = {
        "openai": None,
        "ollama": "http://localhost:11434/v1",
        "vllm": "http://localhost:8000/v1",
        "llamacpp": "http://localhost:8080/v1",
        "lmstudio": "http://localhost:1234/v1",
    }

    def __init__(self) -> None:
        self._clients: dict[tuple[Any, ...], Client] = {}

    @providerimpl(trylast=True)
    def functai_client(self, provider: str, model: str, settings: Mapping[str, Any]) -> Client | None:
        if provider not in self.BASE_URLS:
            return None
        key = (provider, *sorted(settings.items()))
        found = self._clients.get(key)
        if found is not None:  # one client (one connection pool) serves every model of a server
            return found
        from .openai import OpenAIClient

        options: dict[str, Any] = {"name": provider}
        base_url = settings.get("base_url") or self.BASE_URLS[provider]
        if base_url:
            options["base_url"] = base_url
        if settings.get("api_key"):
            options["api_key"] = settings["api_key"]
        if settings.get("timeout") is not None:
            options["timeout"] = float(settings["timeout"])
        if settings.get("http_retries") is not None:
            options["max_retries"] = settings["http_retries"]
        return self._clients.setdefault(key, OpenAIClient(**options))


_lock = threading.Lock()
_manager: pluggy.PluginManager | None = None
_clients: dict[tuple[Any, ...], Client] = {}


def manager() -> pluggy.PluginManager:
    """The provider plugin manager, made (and entry points read) on first use."""
    global _manager
    with _lock:
        if _manager is None:
            pm = pluggy.PluginManager("functai.providers")
            pm.add_hookspecs(ProviderSpec)
            pm.register(OpenAICompatible(), name="openai-compatible")
            pm.load_setuptools_entrypoints("functai.providers")
            _manager = pm
        return _manager


def register_provider(plugin: object, name: str | None = None) -> None:
    """Add a provider plugin: an object or module with ``@providerimpl functai_client``."""
    manager().register(plugin, name=name)
    with _lock:
        _clients.clear()


def split(lm: str) -> tuple[str, str]:
    """``"ollama/llama3"`` → ``("ollama", "llama3")``; a bare name is OpenAI's."""
    provider, slash, model = str(lm).partition("/")
    if not slash:
        return DEFAULT_PROVIDER, str(lm)
    return provider, model


def client_for(lm: str, settings: Mapping[str, Any]) -> tuple[Client, str]:
    """The client for model name ``lm`` and the model name to send it."""
    provider, model = split(lm)
    wanted = {name: settings[name] for name in CLIENT_SETTINGS if settings.get(name) is not None}
    key = (provider, model, *sorted(wanted.items()))
    client = _clients.get(key)
    if client is None:
        client = manager().hook.functai_client(provider=provider, model=model, settings=wanted)
        if client is None:
            raise FunctAIError(
                f"no model client for provider {provider!r} (model {str(lm)!r}); install a provider "
                "plugin for it, use a built-in provider "
                f"({', '.join(OpenAICompatible.BASE_URLS)}), or pass client=...",
                code="model-provider",
            )
        with _lock:
            client = _clients.setdefault(key, client)
    return client, model


def close_clients() -> None:
    """Close and forget the clients made so far (their connections too)."""
    with _lock:
        clients = {id(c): c for c in _clients.values()}.values()
        _clients.clear()
        if _manager is not None:
            for plugin in _manager.get_plugins():
                if isinstance(plugin, OpenAICompatible):
                    plugin._clients.clear()
    for client in clients:
        close = getattr(client, "close", None)
        if close is not None:
            close()
