"""A provider that echoes the API key in its error body must not leak it into the run."""

from __future__ import annotations

import anyio
import httpx
import pytest
import respx

from treadle import AgentContext, AgentEvent, AgentLoopConfig, agent_loop
from treadle.loop import RetryPolicy
from treadle.providers import Anthropic, OpenAIChat, OpenAIResponses

pytestmark = pytest.mark.anyio

KEY = "sk-live-SUPERSECRET-0123456789"


@respx.mock
async def test_a_key_echoed_in_an_error_body_never_reaches_events_or_history() -> None:
    respx.post("https://api.openai.com/v1/chat/completions").mock(
        return_value=httpx.Response(
            401, json={"error": {"message": f"Incorrect API key provided: {KEY}."}}
        )
    )
    send, receive = anyio.create_memory_object_stream[AgentEvent](1000)
    context = AgentContext()
    config = AgentLoopConfig(provider=OpenAIChat("gpt-4o-mini", api_key=KEY))
    async with send:
        await agent_loop(["hi"], context, config, send)
    dumped = "".join(e.model_dump_json() for e in receive._state.buffer)  # type: ignore[attr-defined]
    history = "".join(m.model_dump_json() for m in context.messages)
    assert "Incorrect API key provided: ***" in history
    assert KEY not in dumped and KEY not in history
    receive.close()


@respx.mock
async def test_custom_header_values_are_scrubbed_too() -> None:
    token = "Bearer-proxy-token-abcdef"
    respx.post("https://api.anthropic.com/v1/messages").mock(
        return_value=httpx.Response(500, json={"error": {"message": f"bad header {token}"}})
    )
    provider = Anthropic("claude-sonnet-4-5", api_key="k" * 20, headers={"x-proxy": token})
    context = AgentContext()
    config = AgentLoopConfig(provider=provider, retry=RetryPolicy(max_retries=0))
    await agent_loop(["hi"], context, config)
    assert token not in context.messages[-1].model_dump_json()


@pytest.mark.parametrize("make", [Anthropic, OpenAIResponses])
@respx.mock
async def test_a_key_read_from_the_environment_at_request_time_is_scrubbed_too(
    make: type[Anthropic] | type[OpenAIResponses], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anthropic and Responses read their key when they send (no ``api_key=``)."""
    for variable in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.setenv(variable, KEY)
    echo = httpx.Response(401, json={"error": {"message": f"bad key {KEY}"}})
    respx.post("https://api.anthropic.com/v1/messages").mock(return_value=echo)
    respx.post("https://api.openai.com/v1/responses").mock(return_value=echo)
    context = AgentContext()
    config = AgentLoopConfig(provider=make("some-model"), retry=RetryPolicy(max_retries=0))
    await agent_loop(["hi"], context, config)
    answer = context.messages[-1].model_dump_json()
    assert "bad key ***" in answer and KEY not in answer
