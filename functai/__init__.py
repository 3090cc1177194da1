"""functai: typed Python functions answered by a language model, shaped by plugins.

The public API is what this module exports, and `functai.events` (each hook's typed event),
`functai.testing`, `functai.stores` (for store authors), `functai.cli` (the command) and
`functai.pytest_plugin` (the fixtures). Every module whose name starts with ``_`` is internal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._version import __version__ as __version__
from ._calls.function import AIFunction, ai
from ._calls.layout import baked
from ._calls.reading import read_calls
from ._calls.records import CallRecord, Result
from ._errors import FunctAIError, ModelConfigError, ModelError, NonAnswerError, OutputError, PluginError, Waiting
from ._hooks.adapt import load_plugin
from ._hooks.change import Change
from . import events as events
from ._hooks.events import Answer
from ._hooks.plugin import Plugin
from ._hooks.specs import HOOKS, hookimpl
from ._layers import configure, settings
from ._models.providers import providerimpl, register_provider
from ._models.endpoint import Endpoint
from ._models.request import Reply, Request

if TYPE_CHECKING:  # the names in _LAZY, with their real types for a type checker; never imported here at run time
    from ._builtins import budget, cache, compaction, delegate, fallback
    from ._calls.streaming import StreamEvent
    from ._calls.template import Template
    from ._calls.toolkey import tool_key
    from ._calls.tools import ApprovalError, Tool, tool
    from ._conversations import Conversation, Turn, all_turns, current_turn, last_turns
    from ._evaluation.evaluate import evaluate
    from ._evaluation.optimize import optimize
    from ._evaluation.ratings import rate
    from ._evaluation.whatif import replay
    from ._models.openai import OpenAIClient
    from ._models.toolcall import ToolCall
    from ._stores import FolderStore, MemoryStore, Store

#: Names imported on first use, by module, so ``import functai`` stays light.
_LAZY_FROM = {
    "functai._builtins": ("budget", "cache", "compaction", "delegate", "fallback"),
    "functai._calls.streaming": ("StreamEvent",),
    "functai._calls.template": ("Template",),
    "functai._calls.toolkey": ("tool_key",),
    "functai._calls.tools": ("ApprovalError", "Tool", "tool"),
    "functai._conversations": ("Conversation", "Turn", "all_turns", "current_turn", "last_turns"),
    "functai._evaluation": ("evaluate", "optimize", "rate"),
    "functai._evaluation.whatif": ("replay",),
    "functai._models.openai": ("OpenAIClient",),
    "functai._models.toolcall": ("ToolCall",),
    "functai._stores": ("FolderStore", "MemoryStore", "Store"),
}
_LAZY = {name: module for module, names in _LAZY_FROM.items() for name in names}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'functai' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "AIFunction",
    "Answer",
    "ApprovalError",
    "CallRecord",
    "Change",
    "Conversation",
    "FolderStore",
    "MemoryStore",
    "Store",
    "StreamEvent",
    "Turn",
    "Waiting",
    "all_turns",
    "last_turns",
    "Endpoint",
    "FunctAIError",
    "HOOKS",
    "ModelConfigError",
    "ModelError",
    "NonAnswerError",
    "OpenAIClient",
    "OutputError",
    "Plugin",
    "PluginError",
    "Reply",
    "Request",
    "Result",
    "Template",
    "Tool",
    "ToolCall",
    "ai",
    "baked",
    "budget",
    "cache",
    "compaction",
    "current_turn",
    "delegate",
    "evaluate",
    "fallback",
    "optimize",
    "rate",
    "replay",
    "configure",
    "hookimpl",
    "load_plugin",
    "providerimpl",
    "read_calls",
    "register_provider",
    "settings",
    "tool",
    "tool_key",
]
