"""Many concurrent runs on one adapter: all complete, through a bounded first-come queue in
front of the connection pool (no pool timeouts, no more connections than allowed)."""

from __future__ import annotations

import anyio
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
