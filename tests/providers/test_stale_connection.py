"""A request that fails on a kept-alive connection the server had closed, before any byte
of a response, is sent again at once on a fresh connection: no backoff, no retry event, and
only once per request."""

from __future__ import annotations

import httpx
import pytest

from treadle import Agent
from treadle.providers import ModelRequest, OpenAIChat, ProviderError
from treadle.testing import WireFake, serve
from treadle.types import ProviderRetry, UserMessage

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "responses", "gemini", "ollama"])
async def test_back_to_back_streams_on_a_server_that_closes_kept_alive_connections(
    fmt: str,
) -> None:
    runs = 12
    fake = WireFake(fmt, [f"answer {n}" for n in range(runs)])
    async with serve(fake, close_kept_alive=True) as url:
        suffix = "/v1" if fmt in ("openai", "responses") else ""
        provider = fake.provider(api_key="k", base_url=url + suffix, client=None)
        agent = Agent(provider)
        texts, retries = [], []
        for n in range(runs):
            async with agent.stream(f"question {n}") as events:
                async for event in events:
                    if isinstance(event, ProviderRetry):
                        retries.append(event)
            assert events.result is not None and events.result.error is None
            texts.append(events.result.text)
        await provider.aclose()
    assert texts == [f"answer {n}" for n in range(runs)]
    assert retries == []  # resent silently, not through the loop's backoff
    # each request answered came on its own connection: every reuse was dropped and resent
    assert len({r.connection for r in fake.requests}) == runs
    fake.assert_done()


async def test_the_silent_resend_happens_once_per_request() -> None:
    attempts = []

    def drop(request: httpx.Request) -> httpx.Response:
        attempts.append(request)
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.")

    client = httpx.AsyncClient(transport=httpx.MockTransport(drop))
    provider = OpenAIChat("m", api_key="k", base_url="http://127.0.0.1:9/v1", client=client)
    with pytest.raises(ProviderError) as failed:
        async for _ in provider.stream(ModelRequest(messages=[UserMessage.of("hi")])):
            pass
    await client.aclose()
    assert failed.value.kind == "network" and "disconnected" in failed.value.message
    assert len(attempts) == 2


async def test_a_refused_connection_is_not_resent() -> None:
    attempts = []

    def refuse(request: httpx.Request) -> httpx.Response:
        attempts.append(request)
        raise httpx.ConnectError("connection refused")

    client = httpx.AsyncClient(transport=httpx.MockTransport(refuse))
    provider = OpenAIChat("m", api_key="k", base_url="http://127.0.0.1:9/v1", client=client)
    with pytest.raises(ProviderError):
        async for _ in provider.stream(ModelRequest(messages=[UserMessage.of("hi")])):
            pass
    await client.aclose()
    assert len(attempts) == 1
