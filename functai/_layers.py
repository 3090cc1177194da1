"""Settings layers: the process (``configure``), blocks (``with settings():``, a contextvar),
the function's own (``@ai(**s)``), a conversation's.

For ordinary settings the closest layer that sets a value wins; each layer's ``plugins``
list is a plugin layer of its own (docs/plugins.md, *Where plugins go: layers*). Every value is checked when
it is set, so a mistake shows where it was made.
"""

from __future__ import annotations

import os
import threading
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any, Callable, Mapping

from ._files import check_folder, check_folder_name
from ._hooks.adapt import as_plugins
from ._hooks.installed import installed
from ._hooks.order import Plan, cached_plan
from ._hooks.plugin import Plugin
from ._hooks.timing import timed
from ._log import warn
from ._models.keys import SecretURL, hide_headers, hide_key, hide_url, refuse_url_credentials
from ._models.request import MODEL_SETTING_CHECKS, MODEL_SETTINGS, whole


def _seconds(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise TypeError(f"{name} must be a positive number of seconds, not {value!r}")


def _text(name: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise TypeError(f"{name} must be a non-empty string, not {value!r}")


def _flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, not {value!r}")


def _client(name: str, value: Any) -> None:
    if not callable(getattr(value, "complete", None)):
        raise TypeError(f"client must have a complete(request) method (a model client), not {type(value).__name__}")


#: Call log locations already found writable in this process (each is checked once).
_checked_logs: set[object] = set()  # a URL with a password: by its handle


def check_log_calls(value: object) -> None:
    """Refuse a ``log_calls`` folder or URL that cannot be written, before a model is paid for (once per place)."""
    if type(value) is str and value in _checked_logs:  # every logged call after the first: nothing to do
        return
    if isinstance(value, SecretURL):  # a URL with a password (FUNCTAI_LOG_CALLS, or configure's handle)
        path: str | SecretURL = value
    elif value and isinstance(value, (str, os.PathLike)) and isinstance(os.fspath(value), str):
        path = check_folder_name(os.fspath(value))
    else:
        return
    if path in _checked_logs:
        return
    if isinstance(path, SecretURL) or ":" in path or path.endswith((".db", ".sqlite", ".sqlite3")):
        from ._stores.calllog import check_log_url, is_log_url  # not at import: `import functai` opens no store

        if is_log_url(path):  # a database: its URL and, for SQLite, its file's folder
            check_log_url(path)
            _checked_logs.add(path)
            return
    check_folder(str(path), "call log", file="calls.jsonl")  # (a SecretURL is always a URL)
    _checked_logs.add(path)


def _log_calls(name: str, value: Any) -> None:
    if value is not False and not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a folder path or a store URL (or False), not {type(value).__name__}")
    check_log_calls(value)  # store-unwritable now, not after a model answered


def _base_url(name: str, value: Any) -> None:
    _text(name, value)
    refuse_url_credentials(value, "base_url")


def _headers(name: str, value: Any) -> None:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise TypeError(f"{name} must be a dict of header names to string values")


def _names(name: str, value: Any) -> None:
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(s, str) for s in value):
        raise TypeError(f"{name} must be a list of plugin names")


def _approve(name: str, value: Any) -> None:
    if isinstance(value, str) and value not in ("changes", "all"):
        raise ValueError(
            f"approve={value!r} is not a rule: use 'changes', 'all', a list of tool names or paths, or a function"
        )
    names = isinstance(value, (list, tuple)) and all(isinstance(item, str) and item for item in value)
    if not (callable(value) or isinstance(value, str) or names):
        raise TypeError(f"approve must be 'changes', 'all', a list of tool names or paths, or a function; "
                        f"not {type(value).__name__}")


#: Every setting name, with the check its value must pass.
CHECKS: dict[str, Callable[[str, Any], None]] = {
    **MODEL_SETTING_CHECKS,
    "lm": _text,
    "client": _client,
    "retries": whole(0),
    "max_steps": whole(1),
    "max_depth": whole(1),
    "max_requests": whole(1),
    "max_tool_retries": whole(0),
    "check_inputs": _flag,
    "program_plugins": _flag,
    "log_calls": _log_calls,
    "log_content": _flag,
    "record_timing": _flag,
    "approve": _approve,
    "base_url": _base_url,
    "api_key": _text,
    "timeout": _seconds,
    "connect_timeout": _seconds,
    "headers": _headers,
    "api_version": _text,
    "http_retries": whole(0),
    "workers": whole(1),
    "load_plugins": _names,
    "disable_plugins": _names,
}

#: Settings that may hold a secret, and the handle each is kept behind (`functai._models.keys`).
_HIDDEN: dict[str, Callable[[Any], Any]] = {"api_key": hide_key, "headers": hide_headers, "log_calls": hide_url}

#: All names ``configure``/``settings``/``@ai`` accept (``plugins`` included).
SETTING_NAMES: frozenset[str] = frozenset(CHECKS) | {"plugins"}

DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {"retries": 1, "max_steps": 8, "max_depth": 8, "max_requests": 50, "max_tool_retries": 2, "check_inputs": True,
     "log_content": True}
)


def check_name(name: str) -> None:
    """Refuse an unknown setting name with a `TypeError` naming the closest one."""
    if name not in SETTING_NAMES:
        import difflib

        close = difflib.get_close_matches(name, SETTING_NAMES, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise TypeError(f"unknown setting {name!r}{hint}")


class Layer:
    """One settings layer: ordinary values, and its plugin list (None when unset); immutable by
    convention, and compared by identity (`resolve` caches by it)."""

    __slots__ = ("values", "plugins")

    def __init__(self, values: Mapping[str, Any], plugins: tuple[Plugin, ...] | None = None) -> None:
        self.values = values
        self.plugins = plugins

    def __repr__(self) -> str:
        return f"Layer({dict(self.values)!r}, plugins={self.plugins!r})"

    @classmethod
    def make(cls, where: str, base: "Layer | None" = None, **settings: Any) -> "Layer":
        """Check ``settings`` and return a layer; with ``base``, update it (None unsets)."""
        values = dict(base.values) if base is not None else {}
        plugins = base.plugins if base is not None else None
        for name, value in settings.items():
            check_name(name)
            if name == "plugins":
                plugins = None if value is None else as_plugins(value, where)
            elif value is None:
                values.pop(name, None)
            else:
                CHECKS[name](name, value)
                values[name] = _HIDDEN[name](value) if name in _HIDDEN else value  # secrets stay out of values
        return cls(MappingProxyType(values), plugins)


EMPTY = Layer(MappingProxyType({}), None)


def from_environment() -> Layer:
    """The process layer as the environment starts it (``FUNCTAI_LOG_CALLS=calls/`` logs every call),
    unchecked: a bad value must not make ``import functai`` fail; the call that uses it says why."""
    log_calls = os.environ.get("FUNCTAI_LOG_CALLS")
    return Layer(MappingProxyType({"log_calls": hide_url(log_calls)}), None) if log_calls else EMPTY


_process_lock = threading.Lock()
_process: Layer = from_environment()
_blocks: ContextVar[tuple[Layer, ...]] = ContextVar("functai_blocks", default=())


def configure(**settings: Any) -> None:
    """Set settings for the whole process; each call updates the values it names (``name=None`` unsets one)."""
    global _process
    with _process_lock:
        _process = Layer.make("configure()", _process, **settings)


def reset(to: Layer | None = None) -> Layer:
    """Back to the process layer the environment gives (or ``to``); returns the layer it replaces (tests)."""
    global _process
    with _process_lock:
        before, _process = _process, to if to is not None else from_environment()
    return before


class settings:
    """``with functai.settings(**s):`` — a block layer for the code inside, checked when written.
    It keeps no state (each context's blocks are in `_blocks`): threads and tasks may share one."""

    def __init__(self, **settings: Any) -> None:
        self.layer = Layer.make("a settings() block", **settings)

    def __enter__(self) -> "settings":
        push_block(self.layer)
        return self

    def __exit__(self, *exc: object) -> None:
        pop_block(self.layer)


def _merged(layers: tuple[Layer | None, ...]) -> dict[str, Any]:
    values: dict[str, Any] = dict(DEFAULTS)
    for layer in layers:
        if layer is not None:
            values.update(layer.values)
    return values


def values_for(own: Layer, conversation: Layer | None = None) -> dict[str, Any]:
    """The settings a call of a function whose own layer is ``own`` runs with here (plugins aside)."""
    return _merged((_process, *_blocks.get(), own, conversation))


def current_values() -> dict[str, Any]:
    """The settings the process and the enclosing blocks set here (no function's own)."""
    return _merged((_process, *_blocks.get()))


def current_layers() -> tuple[Layer, tuple[Layer, ...]]:
    """The process layer, and the blocks entered here (outermost first)."""
    return _process, _blocks.get()


def push_block(layer: Layer) -> Layer:
    """Enter a block layer by hand (conversations use this for the calls inside a turn)."""
    _blocks.set(_blocks.get() + (layer,))
    return layer


def pop_block(layer: Layer) -> None:
    """Leave the block `push_block` entered (blocks leave in reverse order)."""
    blocks = _blocks.get()
    if not blocks or blocks[-1] is not layer:
        raise RuntimeError("functai.settings blocks were exited out of order")
    _blocks.set(blocks[:-1])


class Resolved:
    """What one call runs with: merged settings and the plugin plan."""

    __slots__ = ("values", "plan", "model_settings", "settings_view", "whole", "_sitting_out")

    def __init__(self, values: Mapping[str, Any], plan: Plan, model_settings: Mapping[str, Any],
                 whole: "Resolved | None" = None) -> None:
        self.values = values
        self.plan = plan
        #: The model settings among ``values`` (read-only: copy before changing), and a view of them.
        self.model_settings = model_settings
        self.settings_view = MappingProxyType(model_settings)
        #: The resolution with every plugin in, those whose `Plugin.active` says no included.
        self.whole = whole if whole is not None else self
        #: Plugins left out → this resolution without them, made once each.
        self._sitting_out: dict[tuple[Plugin, ...], Resolved] = {}

    def now(self) -> "Resolved":
        """This resolution without the plugins whose `Plugin.active` says no (one whose check raises stays in)."""
        out: tuple[Plugin, ...] = ()
        for plugin in self.plan.gated:
            try:
                if not plugin.active():  # type: ignore[misc]
                    out += (plugin,)
            except Exception as error:
                warn("plugin active check failed", plugin=plugin.name, version=plugin.version,
                     error=f"{type(error).__name__}: {error}")
        if not out:
            return self
        found = self._sitting_out.get(out)
        if found is None:
            found = Resolved(self.values, self.plan.without(out), self.model_settings, self)
            self._sitting_out[out] = found
        return found


_resolved_lock = threading.Lock()
#: Resolutions by the layers (compared by identity) and the installed plugins they were made of.
_resolved: dict[tuple[object, ...], Resolved] = {}


def resolve(own: Layer, conversation: Layer | None = None) -> Resolved:
    """Merge the layers around a call of a function whose own layer is ``own``."""
    blocks = _blocks.get()
    process = _process
    inst = installed()
    key = (own, conversation, blocks, process, inst)
    found = _resolved.get(key)
    if found is not None:
        return found.now() if found.plan.gated else found

    values = _merged((process, *blocks, own, conversation))
    host_layers = [layer for layer in (conversation, *reversed(blocks)) if layer is not None]
    drop_own = any(layer.values.get("program_plugins") is False for layer in (*host_layers, process))
    plan = cached_plan(
        () if drop_own else (own.plugins or ()),
        tuple(layer.plugins for layer in host_layers if layer.plugins),
        process.plugins or (),
        inst.layer(values.get("load_plugins"), values.get("disable_plugins")),
    )
    if values.get("record_timing"):
        plan = timed(plan)
    model_settings = {k: v for k, v in values.items() if k in MODEL_SETTINGS}
    result = Resolved(MappingProxyType(values), plan, model_settings)
    with _resolved_lock:
        if len(_resolved) >= 512:
            _resolved.clear()
        _resolved[key] = result
    return result.now() if plan.gated else result
