"""Azure OpenAI: the OpenAI wire format at a deployment's URL, with an ``api-key`` header.

``lm="azure/<deployment>"`` sends
``POST {endpoint}/openai/deployments/<deployment>/chat/completions?api-version=…``.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import quote

from .._errors import ModelConfigError
from .openai import OpenAIClient

__all__ = ["AzureOpenAIClient", "DEFAULT_API_VERSION"]

#: The generally available API version used when none is set.
DEFAULT_API_VERSION = "2024-10-21"


class AzureOpenAIClient(OpenAIClient):
    """An `OpenAIClient` for Azure OpenAI deployments (the model name is the deployment)."""

    def __init__(self, *, api_version: str | None = None, **options: Any) -> None:
        options.setdefault("name", "azure")
        super().__init__(**options)
        #: The ``api-version`` query parameter sent with every request.
        self.api_version = api_version or os.environ.get("AZURE_OPENAI_API_VERSION") or DEFAULT_API_VERSION

    def _default_base_url(self) -> str:
        raise ModelConfigError(
            "no Azure OpenAI endpoint: set AZURE_OPENAI_ENDPOINT (https://<resource>.openai.azure.com) "
            "or the base_url setting",
            code="model-provider",
        )

    def _auth(self, key: str) -> tuple[str, str]:
        return "api-key", key

    def _url(self, model: str) -> str:
        base = self.base_url.removesuffix("/openai")
        deployment = quote(model, safe="")
        return f"{base}/openai/deployments/{deployment}/chat/completions?api-version={quote(self.api_version)}"
