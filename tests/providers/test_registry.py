"""get_provider: model strings to adapters, base URLs, key variables and errors."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import respx
from tests import wire

from treadle.providers import get_provider
from treadle.providers.anthropic import Anthropic
from treadle.providers.base import ModelRequest, Provider, ProviderError, StreamStart
from treadle.providers.gemini import Gemini
from treadle.providers.ollama import Ollama
from treadle.providers.openai_chat import OpenAIChat
from treadle.providers.openai_responses import OpenAIResponses
from treadle.providers.registry import KNOWN_PROVIDERS
from treadle.types import UserMessage

SECRET = "sk-very-secret-0123456789abcdef"
KEY_VARIABLES = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GROQ_API_KEY",
    "DEEPSEEK_API_KEY",
    "OPENROUTER_API_KEY",
    "TOGETHER_API_KEY",
    "MISTRAL_API_KEY",
    "VLLM_API_KEY",
    "LMSTUDIO_API_KEY",
    "OPENAI_COMPATIBLE_API_KEY",
    "OLLAMA_API_KEY",
    "OLLAMA_HOST",
]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


# ---- which adapter, which server ----

NATIVE = [
    ("openai:gpt-4o-mini", "OPENAI_API_KEY", OpenAIChat, "openai", "https://api.openai.com/v1"),
    (
        "openai-responses:gpt-5",
        "OPENAI_API_KEY",
        OpenAIResponses,
        "openai",
        "https://api.openai.com/v1",
    ),
    (
        "anthropic:claude-sonnet-4-5",
        "ANTHROPIC_API_KEY",
        Anthropic,
        "anthropic",
        "https://api.anthropic.com",
    ),
    (
        "gemini:gemini-2.5-flash",
        "GEMINI_API_KEY",
        Gemini,
        "gemini",
        "https://generativelanguage.googleapis.com",
    ),
    (
        "google:gemini-2.5-flash",
        "GOOGLE_API_KEY",
        Gemini,
        "gemini",
        "https://generativelanguage.googleapis.com",
    ),
]


@pytest.mark.parametrize(("spec", "variable", "cls", "name", "base_url"), NATIVE)
def test_native_providers(
    monkeypatch: pytest.MonkeyPatch, spec: str, variable: str, cls: type, name: str, base_url: str
) -> None:
    monkeypatch.setenv(variable, SECRET)
    provider = get_provider(spec)
    assert type(provider) is cls
    assert isinstance(provider, Provider)
    assert provider.name == name
    assert provider.model == spec.split(":", 1)[1]  # type: ignore[attr-defined]
    assert provider.base_url == base_url  # type: ignore[attr-defined]
    assert SECRET not in repr(provider)


@pytest.mark.parametrize(("spec", "variable", "cls", "name", "base_url"), NATIVE)
def test_native_providers_without_key(
    spec: str, variable: str, cls: type, name: str, base_url: str
) -> None:
    with pytest.raises(ProviderError) as caught:
        get_provider(spec)
    assert caught.value.kind == "auth"
    assert variable in caught.value.message
    assert "api_key=" in caught.value.message
    # A key passed in needs no environment.
    provider = get_provider(spec, api_key=SECRET)
    assert type(provider) is cls
    assert SECRET not in repr(provider)


def test_gemini_key_error_names_both_variables() -> None:
    with pytest.raises(ProviderError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        get_provider("gemini:gemini-2.5-pro")


def test_ollama_needs_no_key() -> None:
    provider = get_provider("ollama:llama3.2:3b")
    assert type(provider) is Ollama
    assert provider.name == "ollama"
    assert provider.model == "llama3.2:3b"
    assert provider.base_url == "http://localhost:11434"


def test_ollama_host_and_url_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "gpu-box:9000")
    assert get_provider("ollama:qwen3").base_url == "http://gpu-box:9000"  # type: ignore[attr-defined]
    provider = get_provider("ollama:qwen3:8b@http://10.1.2.3:11434")
    assert provider.model == "qwen3:8b"  # type: ignore[attr-defined]
    assert provider.base_url == "http://10.1.2.3:11434"  # type: ignore[attr-defined]


COMPATIBLE = [
    ("groq", "GROQ_API_KEY", "https://api.groq.com/openai/v1"),
    ("deepseek", "DEEPSEEK_API_KEY", "https://api.deepseek.com"),
    ("openrouter", "OPENROUTER_API_KEY", "https://openrouter.ai/api/v1"),
    ("together", "TOGETHER_API_KEY", "https://api.together.xyz/v1"),
    ("mistral", "MISTRAL_API_KEY", "https://api.mistral.ai/v1"),
]


@pytest.mark.parametrize(("prefix", "variable", "base_url"), COMPATIBLE)
def test_hosted_compatible_presets(
    monkeypatch: pytest.MonkeyPatch, prefix: str, variable: str, base_url: str
) -> None:
    with pytest.raises(ProviderError) as caught:
        get_provider(f"{prefix}:some/model")
    assert caught.value.kind == "auth" and variable in caught.value.message

    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-must-not-travel")
    monkeypatch.setenv(variable, SECRET)
    provider = get_provider(f"{prefix}:some/model")
    assert type(provider) is OpenAIChat
    assert provider.name == prefix
    assert provider.model == "some/model"
    assert provider.base_url == base_url
    assert provider._api_key == SECRET
    assert SECRET not in repr(provider)


def test_mistral_does_not_send_stream_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MISTRAL_API_KEY", SECRET)
    provider = get_provider("mistral:mistral-large-latest")
    assert isinstance(provider, OpenAIChat)
    body = provider.build_body(ModelRequest(messages=[UserMessage.of("hi")]))
    assert "stream_options" not in body


@pytest.mark.parametrize(
    ("spec", "name", "model", "base_url"),
    [
        (
            "vllm:meta-llama/Llama-3.3-70B",
            "vllm",
            "meta-llama/Llama-3.3-70B",
            "http://localhost:8000/v1",
        ),
        ("vllm:qwen@http://gpu:8001/v1", "vllm", "qwen", "http://gpu:8001/v1"),
        (
            "lmstudio:qwen2.5-7b-instruct",
            "lmstudio",
            "qwen2.5-7b-instruct",
            "http://localhost:1234/v1",
        ),
        (
            "openai-compatible:my-model@http://127.0.0.1:8080/v1",
            "openai-compatible",
            "my-model",
            "http://127.0.0.1:8080/v1",
        ),
        (
            "openai-compatible:m@https://user:pw@llm.example.com/v1",
            "openai-compatible",
            "m",
            "https://user:pw@llm.example.com/v1",
        ),
    ],
)
def test_local_compatible_servers_need_no_key(
    monkeypatch: pytest.MonkeyPatch, spec: str, name: str, model: str, base_url: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-must-not-travel")
    provider = get_provider(spec)
    assert type(provider) is OpenAIChat
    assert (provider.name, provider.model, provider.base_url) == (name, model, base_url)
    # The user's OpenAI key never goes to another server.
    assert provider._api_key is None
    assert "authorization" not in {k.lower() for k in provider._headers()}


def test_openai_compatible_key_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", SECRET)
    provider = get_provider("openai-compatible:m@https://llm.example.com/v1")
    assert isinstance(provider, OpenAIChat)
    assert provider._api_key == SECRET
    assert provider._headers()["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in repr(provider)


def test_openai_compatible_needs_a_url() -> None:
    with pytest.raises(ValueError, match=r"openai-compatible:MODEL@http://host:port/v1"):
        get_provider("openai-compatible:my-model")
    # base_url= works instead of "@url".
    provider = get_provider("openai-compatible:my-model", base_url="http://localhost:9/v1")
    assert provider.base_url == "http://localhost:9/v1"  # type: ignore[attr-defined]


# ---- spec errors ----


@pytest.mark.parametrize("spec", ["gpt-4o-mini", "", ":gpt-4o", "openai:", "openai:  "])
def test_spec_without_provider_or_model(spec: str) -> None:
    with pytest.raises(ValueError, match="provider:model"):
        get_provider(spec)


def test_unknown_provider_lists_known_ones() -> None:
    with pytest.raises(ValueError) as caught:
        get_provider("cohere:command-r")
    message = str(caught.value)
    assert "'cohere'" in message
    for name in KNOWN_PROVIDERS:
        assert name in message
    assert set(KNOWN_PROVIDERS) >= {
        "openai",
        "openai-responses",
        "anthropic",
        "gemini",
        "google",
        "ollama",
        "groq",
        "deepseek",
        "openrouter",
        "together",
        "mistral",
        "vllm",
        "lmstudio",
        "openai-compatible",
    }


def test_at_sign_without_url_stays_in_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    provider = get_provider("anthropic:claude-3-opus@20240229")
    assert provider.model == "claude-3-opus@20240229"  # type: ignore[attr-defined]
    assert provider.base_url == "https://api.anthropic.com"  # type: ignore[attr-defined]


def test_options_reach_the_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    client = httpx.AsyncClient()
    provider = get_provider("gemini:gemini-2.5-flash", api_key=SECRET, stream=False, client=client)
    assert isinstance(provider, Gemini)
    assert provider.streaming is False
    assert provider.client is client
    assert SECRET not in repr(provider) and SECRET not in str(vars(provider).get("model"))


def test_provider_prefix_is_case_insensitive(monkeypatch: pytest.MonkeyPatch) -> None:
    assert type(get_provider("Ollama:llama3.2")) is Ollama


# ---- the request reaches the right server with the right key ----

WIRED = [
    ("groq", "GROQ_API_KEY", "groq/chat-stream-tool-call-single-chunk"),
    ("deepseek", "DEEPSEEK_API_KEY", "deepseek/chat-stream-reasoning-content"),
    ("openrouter", "OPENROUTER_API_KEY", "openrouter/chat-stream-reasoning-comments"),
    ("mistral", "MISTRAL_API_KEY", "mistral/chat-stream-thinking-content-array"),
]


async def first_event(provider: Provider, fixture: dict[str, Any]) -> httpx.Request:
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(fixture["request"]["url"]).mock(return_value=wire.response(fixture))
        stream = provider.stream(ModelRequest(messages=[UserMessage.of("hi")]))
        try:
            assert isinstance(await stream.__anext__(), StreamStart)
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
        return route.calls.last.request


@pytest.mark.anyio
@pytest.mark.parametrize(("prefix", "variable", "name"), WIRED)
async def test_presets_reach_the_recorded_server(
    monkeypatch: pytest.MonkeyPatch, prefix: str, variable: str, name: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-must-not-travel")
    monkeypatch.setenv(variable, SECRET)
    fixture = wire.load(name)
    provider = get_provider(f"{prefix}:{fixture['request']['body']['model']}")
    sent = await first_event(provider, fixture)
    assert str(sent.url) == fixture["request"]["url"]
    assert sent.headers["authorization"] == f"Bearer {SECRET}"


@pytest.mark.anyio
async def test_openai_compatible_reaches_its_server_without_the_openai_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-must-not-travel")
    fixture = wire.load("vllm/chat-stream-usage")
    model = fixture["request"]["body"]["model"]
    provider = get_provider(f"openai-compatible:{model}@https://api.inference.crusoecloud.com/v1")
    sent = await first_event(provider, fixture)
    assert str(sent.url) == fixture["request"]["url"]
    assert "authorization" not in sent.headers


@pytest.mark.anyio
async def test_gemini_and_ollama_through_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", SECRET)
    fixture = wire.load("google/stream-text")
    sent = await first_event(get_provider("google:gemini-2.0-flash-exp"), fixture)
    assert sent.headers["x-goog-api-key"] == SECRET and SECRET not in str(sent.url)
    fixture = wire.load("ollama/api-chat-stream-text")
    sent = await first_event(get_provider("ollama:gemma3:1b"), fixture)
    assert str(sent.url) == "http://localhost:11434/api/chat"
