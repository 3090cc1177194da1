"""functai: typed Python functions answered by a language model, shaped by plugins.

The public API is what this module exports (and `functai.testing`).
"""

from __future__ import annotations

from .calls.function import AIFunction, Result, ai
from .calls.layout import Template, baked
from .calls.records import CallRecord, read_calls
from .calls.tools import ApprovalError, Tool, tool
from .errors import FunctAIError, ModelError, OutputError, PluginError
from .hooks.adapt import load_plugin
from .hooks.change import Change
from .hooks.plugin import Plugin
from .hooks.specs import HOOKS, hookimpl
from .models.providers import providerimpl, register_provider
from .models.request import Reply, Request, ToolCall
from .layers import configure, settings

__version__ = "0.1.0"

__all__ = [
    "AIFunction",
    "ApprovalError",
    "CallRecord",
    "Change",
    "FunctAIError",
    "HOOKS",
    "ModelError",
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
    "configure",
    "hookimpl",
    "load_plugin",
    "providerimpl",
    "read_calls",
    "register_provider",
    "settings",
    "tool",
]
