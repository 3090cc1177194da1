"""An example functai provider: ``lm="gateway/<model>"`` asks an OpenAI-compatible gateway.

The gateway is at ``GATEWAY_BASE_URL`` (or the ``base_url`` setting) and
wants its own key, ``GATEWAY_API_KEY`` (or the ``api_key`` setting), plus a
header naming the app. functai asks providers for a client once per model
and settings, and reuses it, so this function only builds one.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

import functai
from functai import OpenAIClient


@functai.providerimpl
def functai_client(provider: str, model: str, settings: Mapping[str, Any]) -> OpenAIClient | None:
    if provider != "gateway":
        return None  # another provider's model: let the others answer
    return OpenAIClient(
        name="gateway",
        base_url=settings.get("base_url") or os.environ.get("GATEWAY_BASE_URL") or "http://localhost:4000/v1",
        api_key=settings.get("api_key"),
        api_key_env="GATEWAY_API_KEY",  # never OPENAI_API_KEY: that key is OpenAI's
        headers={**settings.get("headers", {}), "X-Gateway-App": "functai-example"},
        timeout=settings.get("timeout", 60.0),
    )
