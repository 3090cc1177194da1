"""The Azure OpenAI provider over loopback: deployment URL, api-version, the api-key header."""

from __future__ import annotations

from typing import Iterator

import pytest
from loopback import LoopbackServer, Scripted, completion

import functai
from functai import ai
from functai._errors import FunctAIError
from functai._models.azure import DEFAULT_API_VERSION

AZURE_KEY = "azure-key-0123456789abcdef"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    for name in ("AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_API_VERSION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-must-not-go-to-azure")
    with LoopbackServer(default=Scripted(body=completion("Lima"))) as srv:
        yield srv


@ai
def capital(country: str) -> str:
    """The capital city of the country."""


def test_a_deployment_is_asked_at_its_url_with_the_api_key_header(server: LoopbackServer, monkeypatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", server.root)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", AZURE_KEY)
    functai.configure(lm="azure/gpt4o-prod")
    value, record = capital.run("Peru")
    assert value == "Lima" and record.model == "azure/gpt4o-prod"
    [got] = server.requests
    assert got.path == f"/openai/deployments/gpt4o-prod/chat/completions?api-version={DEFAULT_API_VERSION}"
    assert got.headers["api-key"] == AZURE_KEY
    assert "authorization" not in got.headers  # and so OPENAI_API_KEY is not sent


def test_api_version_and_base_url_settings(server: LoopbackServer) -> None:
    functai.configure(lm="azure/dep", base_url=server.root + "/openai", api_key=AZURE_KEY, api_version="2025-01-01-preview")
    capital("Peru")
    assert server.requests[0].path == "/openai/deployments/dep/chat/completions?api-version=2025-01-01-preview"
    assert server.requests[0].headers["api-key"] == AZURE_KEY


def test_no_endpoint_is_a_clear_error() -> None:
    functai.configure(lm="azure/dep")
    with pytest.raises(FunctAIError) as info:
        capital("Peru")
    assert info.value.code == "model-provider" and "AZURE_OPENAI_ENDPOINT" in info.value.message
    assert isinstance(info.value, functai.ModelConfigError)  # a setting to fix, nothing was sent
