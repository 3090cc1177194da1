"""functai: typed Python functions answered by a language model, shaped by plugins.

The public API is what this module exports (and `functai.testing`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"  # before the imports: `hooks.installed` reads it while they run

from .calls.function import AIFunction, ai
from .calls.layout import baked
from .calls.records import CallRecord, Result, read_calls
from .errors import FunctAIError, ModelConfigError, ModelError, NonAnswerError, OutputError, PluginError, Waiting
from .hooks.adapt import load_plugin
from .hooks.change import Change
from .hooks.plugin import Plugin
from .hooks.specs import HOOKS, hookimpl
from .layers import configure, settings
from .models.providers import providerimpl, register_provider
from .models.request import Reply, Request

if TYPE_CHECKING:  # the names in _LAZY, with their real types for a type checker; never imported here at run time
    from .builtins import compaction, delegate
    from .calls.streaming import StreamEvent
    from .calls.template import Template
    from .calls.tools import ApprovalError, Tool, tool
    from .conversations import Conversation, Turn, all_turns, current_turn, last_turns
    from .evaluation.evaluate import evaluate
    from .evaluation.optimize import optimize
    from .evaluation.ratings import rate
    from .models.toolcall import ToolCall
    from .stores import FolderStore, MemoryStore, Store

#: Names imported on first use, by module, so ``import functai`` stays light.
_LAZY_FROM = {
    "functai.builtins": ("compaction", "delegate"),
    "functai.calls.streaming": ("StreamEvent",),
    "functai.calls.template": ("Template",),
    "functai.calls.tools": ("ApprovalError", "Tool", "tool"),
    "functai.conversations": ("Conversation", "Turn", "all_turns", "current_turn", "last_turns"),
    "functai.evaluation": ("evaluate", "optimize", "rate"),
    "functai.models.toolcall": ("ToolCall",),
    "functai.stores": ("FolderStore", "MemoryStore", "Store"),
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
    "FunctAIError",
    "HOOKS",
    "ModelConfigError",
    "ModelError",
    "NonAnswerError",
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
    "compaction",
    "current_turn",
    "delegate",
    "evaluate",
    "optimize",
    "rate",
    "configure",
    "hookimpl",
    "load_plugin",
    "providerimpl",
    "read_calls",
    "register_provider",
    "settings",
    "tool",
]
