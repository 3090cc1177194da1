"""The attribute names functai-otel sets, and how functai's own names map onto them.

Names under ``gen_ai.``, ``server.`` and ``error.`` are the OpenTelemetry
semantic conventions' (the plugin's tests check each against the
``opentelemetry-semantic-conventions`` package); ``functai.*`` names are this
plugin's own. Written out here so that tracing needs ``opentelemetry-api`` only.
"""

from __future__ import annotations

from typing import Any

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
MODEL = "gen_ai.request.model"
OUTPUT_TYPE = "gen_ai.output.type"
STOP = "gen_ai.request.stop_sequences"
FINISH_REASONS = "gen_ai.response.finish_reasons"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_MODEL = "gen_ai.response.model"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
CONVERSATION = "gen_ai.conversation.id"
AGENT_NAME = "gen_ai.agent.name"
#: What was said (only when asked for: `functai_otel.content`).
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"

FUNCTION = "functai.function"
CALL_PATH = "functai.path"
CALL_ID = "functai.call.id"

#: Model settings (`functai.Request.settings`) → their ``gen_ai.request.*`` attribute.
SETTINGS = {
    "temperature": "gen_ai.request.temperature",
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "top_p": "gen_ai.request.top_p",
    "seed": "gen_ai.request.seed",
    "presence_penalty": "gen_ai.request.presence_penalty",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "stop": STOP,
}

#: Token counts (`functai.Reply.usage` names) → their ``gen_ai.usage.*`` attribute.
#: What a ``chat`` span says that its metrics say too (the conventions' metric attributes).
METRIC_ATTRIBUTES = ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.model",
                     "server.address", "server.port")

USAGE = {
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "cached_tokens": "gen_ai.usage.cache_read.input_tokens",
    "reasoning_tokens": "gen_ai.usage.reasoning.output_tokens",
}

#: functai's provider names whose ``gen_ai.provider.name`` is another (the rest are the same word).
_PROVIDERS = {"azure": "azure.ai.openai"}


def provider_name(provider: str) -> str:
    """``gen_ai.provider.name`` of a functai provider (``"ollama/llama3"`` → ``"ollama"``)."""
    return _PROVIDERS.get(provider, provider)


def setting_attributes(attributes: dict[str, Any], settings: Any) -> None:
    """Add the ``gen_ai.request.*`` attributes of a request's model settings."""
    for key, value in settings.items():
        name = SETTINGS.get(key)
        if name is None or value is None:
            continue
        if name is STOP:  # one text or a list of them: always a list of text on a span
            value = (value,) if isinstance(value, str) else tuple(value)
        attributes[name] = value
