"""``auth=`` on every HTTP adapter: a token provider or an ``httpx.Auth`` asked for each
request, retried once on a 401 with a fresh token, and never leaked (docs/providers.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
import respx

from treadle import AgentContext, AgentLoopConfig, UsageError, agent_loop
from treadle.loop import RetryPolicy
from treadle.providers import (
    Anthropic,
    BearerToken,
    Gemini,
    Ollama,
    OpenAIChat,
    OpenAIResponses,
    ProviderError,
)
from treadle.providers.base import ModelRequest
from treadle.types import UserMessage

pytestmark = pytest.mark.anyio

TOKEN = "eyJ0eXAiOiJKV1Qi.short-lived-token-0001"
FRESH = "eyJ0eXAiOiJKV1Qi.short-lived-token-0002"

CHAT_OK = {
    "id": "c1",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}

ADAPTERS: dict[str, tuple[Callable[..., Any], str]] = {
    "openai_chat": (lambda **o: OpenAIChat("m", **o), "https://api.openai.com/v1/chat/completions"),
    "openai_responses": (
        lambda **o: OpenAIResponses("m", **o),
        "https://api.openai.com/v1/responses",
    ),
    "anthropic": (lambda **o: Anthropic("m", **o), "https://api.anthropic.com/v1/messages"),
    "gemini": (
        lambda **o: Gemini("m", **o),
        "https://generativelanguage.googleapis.com/v1beta/models/m:streamGenerateContent",
    ),
    "ollama": (
        lambda **o: Ollama("m", base_url="https://ollama.com", **o),
        "https://ollama.com/api/chat",
    ),
}

KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "OLLAMA_API_KEY",
)


async def _drain(provider: Any) -> None:
    request = ModelRequest(messages=[UserMessage.of("hi")], model=provider.model)
    async for _ in provider.stream(request):
        pass


@pytest.mark.parametrize("name", sorted(ADAPTERS))
@respx.mock
async def test_each_adapter_sends_the_providers_token_and_no_key_of_its_own(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in KEY_VARIABLES:  # a key in the environment must not fight auth= for a header
        monkeypatch.setenv(variable, "env-key-must-not-be-sent-000")
    make, url = ADAPTERS[name]
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(400, json={"error": {"message": "stop here"}})

    respx.post(url__startswith=url).mock(side_effect=answer)
    asked: list[int] = []

    def provider() -> str:
        asked.append(1)
        return TOKEN

    adapter = make(auth=provider)
    with pytest.raises(ProviderError):
        await _drain(adapter)
    assert len(seen) == 1 and len(asked) == 1
    headers = seen[0].headers
    assert headers["authorization"] == f"Bearer {TOKEN}"
    sent = str(headers) + str(seen[0].url)
    assert "env-key-must-not-be-sent" not in sent
    assert "x-api-key" not in headers and "x-goog-api-key" not in headers
    assert TOKEN not in repr(adapter)


@respx.mock
async def test_an_async_provider_is_awaited_and_asked_again_for_each_request() -> None:
    tokens = iter([TOKEN, FRESH])
    seen: list[str] = []

    async def provider() -> str:
        return next(tokens)

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["authorization"])
        return httpx.Response(200, json=CHAT_OK)

    respx.post("https://api.openai.com/v1/chat/completions").mock(side_effect=answer)
    adapter = OpenAIChat("m", auth=provider, stream=False)
    await _drain(adapter)
    await _drain(adapter)
    assert seen == [f"Bearer {TOKEN}", f"Bearer {FRESH}"]


@respx.mock
async def test_a_401_asks_the_provider_once_more_and_sends_again_with_the_fresh_token() -> None:
    tokens = iter([TOKEN, FRESH])
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["authorization"])
        if request.headers["authorization"] == f"Bearer {TOKEN}":
            return httpx.Response(401, json={"error": {"message": "token expired"}})
        return httpx.Response(200, json=CHAT_OK)

    respx.post("https://api.openai.com/v1/chat/completions").mock(side_effect=answer)
    await _drain(OpenAIChat("m", auth=lambda: next(tokens), stream=False))
    assert seen == [f"Bearer {TOKEN}", f"Bearer {FRESH}"]


@respx.mock
async def test_a_401_with_the_same_token_again_is_an_auth_error_not_a_loop() -> None:
    route = respx.post("https://api.openai.com/v1/chat/completions").mock(
        return_value=httpx.Response(401, json={"error": {"message": "no"}})
    )
    with pytest.raises(ProviderError) as caught:
        await _drain(OpenAIChat("m", auth=lambda: TOKEN, stream=False))
    assert caught.value.kind == "auth" and route.call_count == 1


@respx.mock
async def test_a_token_echoed_by_a_hostile_server_is_blanked_from_the_history() -> None:
    respx.post("https://api.anthropic.com/v1/messages").mock(
        return_value=httpx.Response(500, json={"error": {"message": f"bad token {TOKEN}"}})
    )
    context = AgentContext()
    provider = Anthropic("m", auth=lambda: TOKEN)
    await agent_loop(
        ["hi"], context, AgentLoopConfig(provider=provider, retry=RetryPolicy(max_retries=0))
    )
    answer = context.messages[-1].model_dump_json()
    assert "bad token ***" in answer and TOKEN not in answer


@respx.mock
async def test_an_httpx_auth_of_the_users_own_signs_each_request() -> None:
    class Signed(httpx.Auth):
        def auth_flow(self, request: httpx.Request) -> Any:
            request.headers["x-signature"] = "sig-" + str(len(request.content))
            yield request

    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=CHAT_OK)

    respx.post("https://api.openai.com/v1/chat/completions").mock(side_effect=answer)
    await _drain(OpenAIChat("m", auth=Signed(), stream=False))
    assert seen[0].headers["x-signature"] == f"sig-{len(seen[0].content)}"
    assert "authorization" not in seen[0].headers


async def test_a_provider_that_raises_is_an_auth_error_naming_what_it_raised() -> None:
    def provider() -> str:
        raise RuntimeError("no credentials found in the chain")

    with pytest.raises(ProviderError) as caught:
        await _drain(OpenAIChat("m", auth=provider, stream=False))
    assert caught.value.kind == "auth"
    assert "RuntimeError: no credentials found in the chain" in caught.value.message


async def test_a_provider_returning_something_not_a_token_is_an_auth_error() -> None:
    with pytest.raises(ProviderError) as caught:
        await _drain(OpenAIChat("m", auth=lambda: None, stream=False))  # type: ignore[arg-type]
    assert caught.value.kind == "auth" and "NoneType" in caught.value.message


def test_both_api_key_and_auth_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="both api_key= and auth="):
        OpenAIChat("m", api_key="sk-123", auth=lambda: TOKEN)


def test_a_str_for_auth_says_where_a_fixed_key_goes() -> None:
    with pytest.raises(UsageError, match="api_key="):
        OpenAIChat("m", auth="sk-123")  # type: ignore[arg-type]


def test_the_bearer_tokens_repr_holds_no_token() -> None:
    auth = BearerToken(lambda: TOKEN)
    assert TOKEN not in repr(auth) and "authorization" in repr(auth)


def test_a_model_string_with_auth_needs_no_key_in_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from treadle.providers import get_provider

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    adapter = get_provider("anthropic:claude-sonnet-4-5", auth=lambda: TOKEN)
    assert isinstance(adapter, Anthropic) and adapter.model == "claude-sonnet-4-5"
