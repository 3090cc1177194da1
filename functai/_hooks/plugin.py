"""`Plugin`: a named, versioned set of handlers for hooks."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar, overload

from .._errors import PluginError
from .specs import HOOKS

F = TypeVar("F", bound=Callable[..., Any])

_NAME = r"[a-z][a-z0-9_-]{0,63}"
# A version in any spelling PEP 440 normalizes ("v1!2.0.dev3+local.7"), or a semantic version.
_PEP440 = (
    r"v?(\d+!)?\d+(\.\d+)*"
    r"([-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?\d*)?"
    r"(-\d+|[-_.]?(post|rev|r)[-_.]?\d*)?"
    r"([-_.]?dev[-_.]?\d*)?"
    r"(\+[a-z0-9]+([-_.][a-z0-9]+)*)?"
)
_SEMVER = r"\d+\.\d+\.\d+(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?"

#: The most characters a plugin's ``chunk`` handlers may hold back (``chunk_window``).
MAX_WINDOW = 1 << 20

#: The plugin API versions this runtime implements.
API_VERSIONS = frozenset({1})


def check_name(name: object) -> str:
    """Return ``name`` if it is a valid plugin name, else refuse ``plugin-name``."""
    if not isinstance(name, str) or not re.fullmatch(_NAME, name):
        raise PluginError(
            f"invalid plugin name {name!r}: use 1-64 characters, a lower-case letter first, "
            "then lower-case letters, digits, '_' or '-'",
            code="plugin-name",
            plugin=name if isinstance(name, str) else None,
        )
    return name


def check_version(version: object, plugin: str) -> str:
    """Return ``version`` if PEP 440 or semantic versioning reads it, else refuse ``plugin-version``."""
    if not isinstance(version, str) or not (
        re.fullmatch(_PEP440, version, re.IGNORECASE) or re.fullmatch(_SEMVER, version)
    ):
        raise PluginError(
            f"plugin {plugin!r}: version {version!r} is not a version: use a PEP 440 or semantic version "
            "such as '1.0.0', '2.1' or '1.0.0rc1' (the record names the version that changed each call)",
            code="plugin-version",
            plugin=plugin,
        )
    return version


def _check_takes_the_event(fn: Callable[..., Any], hook: str, plugin: str) -> None:
    """Refuse, when it is registered rather than at the first call, a handler that cannot be called
    with its one argument, the event."""
    import inspect

    try:
        signature = inspect.signature(fn, follow_wrapped=False)
    except (TypeError, ValueError):  # no signature to read (some built-ins): called as it is
        return
    try:
        signature.bind(None)
    except TypeError:
        event = "".join(part.title() for part in hook.split("_"))
        raise PluginError(f"plugin {plugin!r}: its {hook} handler {qualified_name(fn)}{signature} cannot be called "
                          f"with the one argument a hook passes (the event, functai.events.{event})",
                          code="plugin-hook", plugin=plugin, hook=hook) from None


def check_hook(hook: str, plugin: str | None) -> str:
    """Return ``hook`` if it names a hook, else refuse ``plugin-hook``."""
    if hook not in HOOKS:
        import difflib

        close = difflib.get_close_matches(str(hook), HOOKS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; hooks are: {', '.join(HOOKS)}"
        raise PluginError(
            f"plugin {plugin!r} registers a handler for {hook!r}, which is not a hook{hint}",
            code="plugin-hook",
            plugin=plugin,
            hook=str(hook),
        )
    return hook


class Plugin:
    """A named, versioned set of hook handlers.

    >>> modes = Plugin("modes", version="1.0.0")
    >>> @modes.before_call
    ... def careful(call):
    ...     return Change(sections=["Answer carefully."])
    >>> modes
    Plugin("modes", 1.0.0: before_call)
    """

    __slots__ = ("name", "version", "api", "description", "active", "last", "before", "after", "requires", "serves",
                 "chunk_window", "_handlers")

    if TYPE_CHECKING:  # set from HOOKS below the class; named here so a type checker knows them
        def turn_start(self, fn: F) -> F: ...
        def context(self, fn: F) -> F: ...
        def before_call(self, fn: F) -> F: ...
        def request(self, fn: F) -> F: ...
        def model_error(self, fn: F) -> F: ...
        def chunk(self, fn: F) -> F: ...
        def reply(self, fn: F) -> F: ...
        def tool_call(self, fn: F) -> F: ...
        def tool_error(self, fn: F) -> F: ...
        def tool_result(self, fn: F) -> F: ...
        def call_end(self, fn: F) -> F: ...
        def turn_end(self, fn: F) -> F: ...
        def turn_wait(self, fn: F) -> F: ...
        def turn_answer(self, fn: F) -> F: ...

    def __init__(
        self,
        name: str,
        version: str = "0.0.0",
        api: int = 1,
        description: str = "",
        active: Callable[[], bool] | None = None,
        last: bool = False,
        before: Sequence[str] = (),
        after: Sequence[str] = (),
        requires: Sequence[str] = (),
        serves: Sequence[str] = (),
        chunk_window: int = 0,
        **handlers: Callable[[Any], Any],
    ) -> None:
        self.name = check_name(name)
        check_version(version, name)
        if isinstance(api, bool) or api not in API_VERSIONS:
            raise PluginError(
                f"plugin {name!r} was written for plugin API {api!r}; this functai implements API "
                f"{', '.join(map(str, sorted(API_VERSIONS)))} — use a version of the plugin written for it",
                code="plugin-api",
                plugin=name,
            )
        self.version = version
        self.api = api
        self.description = description
        if active is not None and not callable(active):
            raise TypeError(f"plugin {name!r}: active must be a function of no arguments, not {type(active).__name__}")
        #: Asked before each call: while it returns False the plugin sits the call out and costs it
        #: nothing (a tracer with no one to send spans to).
        self.active = active
        if not isinstance(last, bool):
            raise TypeError(f"plugin {name!r}: last must be True or False, not {last!r}")
        #: Its handlers run after every other plugin's: for guards that must see the final input.
        self.last = last
        #: Plugins of its layer it runs before / after, and plugins a call must run for it to run at all.
        self.before = _names(before, "before", name)
        self.after = _names(after, "after", name)
        self.requires = _names(requires, "requires", name)
        #: Settings it serves (``["approve"]``: a call with ``approve`` set and no plugin serving it refuses).
        self.serves = _names(serves, "serves", name, check=False)
        if isinstance(chunk_window, bool) or not isinstance(chunk_window, int) or not 0 <= chunk_window <= MAX_WINDOW:
            raise TypeError(f"plugin {name!r}: chunk_window is how many characters of a streamed reply its chunk "
                            f"handlers may hold back, a whole number from 0 to {MAX_WINDOW}, not {chunk_window!r}")
        #: Characters of a reply's text its ``chunk`` handlers may hold back (0: they may not hold).
        self.chunk_window = chunk_window
        self._handlers: dict[str, list[Callable[[Any], Any]]] = {}
        for hook, fn in handlers.items():
            self.on(hook, fn)

    @overload
    def on(self, hook: str, fn: F) -> F: ...

    @overload
    def on(self, hook: str) -> Callable[[F], F]: ...

    def on(self, hook: str, fn: Any = None) -> Any:
        """Register ``fn`` as a handler for ``hook`` and return it; without ``fn``, a decorator."""
        check_hook(hook, self.name)
        if fn is None:
            return lambda handler: self.on(hook, handler)
        if not callable(fn):
            raise TypeError(f"plugin {self.name!r}: the {hook} handler must be callable, not {type(fn).__name__}")
        _check_takes_the_event(fn, hook, self.name)
        self._handlers.setdefault(hook, []).append(fn)
        return fn

    def handlers(self, hook: str) -> tuple[Callable[[Any], Any], ...]:
        """This plugin's handlers for ``hook``, in registration order."""
        return tuple(self._handlers.get(hook, ()))

    @property
    def hooks(self) -> tuple[str, ...]:
        """The hooks this plugin has handlers for, in hook-table order."""
        return tuple(hook for hook in HOOKS if hook in self._handlers)

    def describe(self) -> str:
        """A short text: name, version, plugin API, and each hook with its handlers' qualified names."""
        lines = [f"{self.name} {self.version} (plugin API {self.api})"]
        if self.description:
            lines.append(f"  {self.description}")
        declared = [f"{field}={list(getattr(self, field))}" for field in ("before", "after", "requires", "serves")
                    if getattr(self, field)]
        if self.last:
            declared.insert(0, "last=True")
        if self.chunk_window:
            declared.append(f"chunk_window={self.chunk_window}")
        if declared:
            lines.append(f"  declares {', '.join(declared)}")
        for hook in self.hooks:
            lines.append(f"  {hook}: {', '.join(map(qualified_name, self._handlers[hook]))}")
        if not self._handlers:
            lines.append("  no handlers")
        return "\n".join(lines)

    def __repr__(self) -> str:
        hooks = ", ".join(self.hooks)
        return f'Plugin("{self.name}", {self.version}{": " + hooks if hooks else ""})'


def _names(value: Any, field: str, plugin: str, check: bool = True) -> tuple[str, ...]:
    """A declaration's list of names (plugin names, unless ``check`` is False)."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"plugin {plugin!r}: {field}= takes a list of names, not {value!r}")
    if check:
        for other in value:
            check_name(other)
            if other == plugin:
                raise PluginError(f"plugin {plugin!r} names itself in {field}=", code="plugin-order", plugin=plugin)
    return tuple(value)


def qualified_name(fn: Callable[..., Any]) -> str:
    """``module.qualname`` of a handler (what follows ``functools.wraps``), else its repr."""
    inner = getattr(fn, "func", None)  # functools.partial
    target = inner if inner is not None and not hasattr(fn, "__qualname__") else fn
    name = getattr(target, "__qualname__", None)
    module = getattr(target, "__module__", None)
    if not isinstance(name, str):
        return repr(fn)
    return f"{module}.{name}" if module else name


def _decorator(hook: str) -> Callable[[Plugin, F], F]:
    def register(self: Plugin, fn: F) -> F:
        return self.on(hook, fn)

    register.__name__ = hook
    register.__qualname__ = f"Plugin.{hook}"
    register.__doc__ = f"Decorator: register the function as a ``{hook}`` handler."
    return register


for _hook in HOOKS:
    setattr(Plugin, _hook, _decorator(_hook))
del _hook
