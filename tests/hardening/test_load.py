"""Many concurrent runs on one adapter: all complete, through a bounded first-come queue in
front of the connection pool (no pool timeouts, no more connections than allowed)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import httpx
import pytest

from treadle import AgentContext, AgentLoopConfig, agent_loop
from treadle.providers import OpenAIChat
from treadle.testing import Slow, WireFake, serve

pytestmark = pytest.mark.anyio


async def test_two_hundred_runs_share_four_connections() -> None:
    fake = WireFake.openai(default=Slow("ok", delay=0.001))
    done: list[str] = []
    async with serve(fake) as url:
        provider = OpenAIChat("m", base_url=f"{url}/v1", api_key="k")
        provider.max_connections = 4
        config = AgentLoopConfig(provider=provider)

        async def one() -> None:
            new = await agent_loop("hi", AgentContext(), config)
            done.append(new[-1].text)  # type: ignore[union-attr]

        async with anyio.create_task_group() as tg:
            for _ in range(200):
                tg.start_soon(one)
        await provider.aclose()
    assert done == ["ok"] * 200
    connections = {r.connection for r in fake.requests}
    assert len(fake.requests) == 200 and len(connections) <= 4


class _Counting(httpx.AsyncBaseTransport):
    """Counts the requests in flight (sent, body not yet closed) through ``inner``."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner, self.active, self.peak = inner, 0, 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.active += 1
        self.peak = max(self.peak, self.active)
        response = await self.inner.handle_async_request(request)
        return httpx.Response(
            response.status_code, headers=response.headers, stream=_Closing(response, self)
        )


class _Closing(httpx.AsyncByteStream):
    def __init__(self, response: httpx.Response, counter: _Counting) -> None:
        self.response, self.counter = response, counter

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.response.aiter_raw():
            yield chunk

    async def aclose(self) -> None:
        self.counter.active -= 1
        await self.response.aclose()


async def test_the_queue_bounds_requests_in_flight_whatever_the_client_s_pool() -> None:
    """A caller's client may allow 100 connections; ``max_connections`` still holds."""
    fake = WireFake.openai(default=Slow("ok", delay=0.005))
    counting = _Counting(fake)
    client = httpx.AsyncClient(transport=counting)
    provider = OpenAIChat("m", api_key="k", client=client)
    provider.max_connections = 2
    config = AgentLoopConfig(provider=provider)
    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(agent_loop, "hi", AgentContext(), config)
    await client.aclose()
    assert len(fake.requests) == 8 and counting.active == 0
    assert counting.peak == 2
