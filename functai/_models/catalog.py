"""The names functai knows without asking any provider plugin: the built-in providers (where
their servers usually are, the variables they read) and the offline models. Beside the registry
(`functai._models.providers`) and below the clients that read it, so neither imports the other."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["DEFAULT_PROVIDER", "PROVIDERS", "Provider", "SCRIPTED_MODEL", "TEST_MODEL"]

DEFAULT_PROVIDER = "openai"

#: The model name of functai's offline test model.
TEST_MODEL = "test"

#: The model name calls answered by `functai.testing.ScriptedLM` record: no provider's, and never sent to one.
SCRIPTED_MODEL = "scripted"


class Provider(NamedTuple):
    """A built-in provider: where its server usually is, and the variables it reads."""

    base_url: str | None
    base_url_env: str
    api_key_env: str


#: The built-in providers (docs/models.md shows this table).
PROVIDERS: dict[str, Provider] = {
    "openai": Provider("https://api.openai.com/v1", "OPENAI_BASE_URL", "OPENAI_API_KEY"),
    "ollama": Provider("http://localhost:11434/v1", "OLLAMA_BASE_URL", "OLLAMA_API_KEY"),
    "vllm": Provider("http://localhost:8000/v1", "VLLM_BASE_URL", "VLLM_API_KEY"),
    "llamacpp": Provider("http://localhost:8080/v1", "LLAMACPP_BASE_URL", "LLAMACPP_API_KEY"),
    "lmstudio": Provider("http://localhost:1234/v1", "LMSTUDIO_BASE_URL", "LMSTUDIO_API_KEY"),
    "azure": Provider(None, "AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY"),
}
