"""The loop reads time only from the event loop's clock, so it runs under a mock clock.

``max_duration_s``, retry backoff and the idle watchdog all follow ``anyio.current_time()``:
trio's ``MockClock`` and the simulation's virtual-time asyncio loop move them without real
waiting. (Before, the duration limit read ``time.monotonic()`` and never fired under a mock
clock however much virtual time passed.)
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from treadle import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    ExecutionLimits,
    ToolCall,
    agent_loop,
    tool,
)
from treadle.loop import RetryPolicy
from treadle.providers import ProviderError
from treadle.simulation._clock import asyncio_loop_factory
from treadle.testing import ScriptedProvider


def _run_on_mock_clock(backend: str, main: Any) -> Any:
    if backend == "trio":
        import trio.testing

        options: dict[str, Any] = {"clock": trio.testing.MockClock(autojump_threshold=0)}
    else:
        options = {"loop_factory": asyncio_loop_factory()}
    return anyio.run(main, backend=backend, backend_options=options)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_max_duration_s_counts_the_event_loops_clock(backend: str) -> None:
    @tool
    async def wait(x: int) -> str:
        """Wait a long time."""
        await anyio.sleep(100)
        return "waited"

    calls = [
        AssistantMessage(content=[ToolCall(id=f"c{i}", name="wait", arguments={"x": i})])
        for i in range(10)
    ]
    config = AgentLoopConfig(
        provider=ScriptedProvider(calls), limits=ExecutionLimits(max_duration_s=250)
    )
    context = AgentContext(tools=[wait])

    async def main() -> tuple[float, float]:
        start = anyio.current_time()
        await agent_loop(["go"], context, config)
        return start, anyio.current_time()

    real = time.monotonic()
    start, end = _run_on_mock_clock(backend, main)
    assert time.monotonic() - real < 30  # 300 virtual seconds, not real ones
    assert end - start == pytest.approx(300)
    assert context.messages[-1].text.startswith("[Agent stopped: ran 300.0s of max_duration_s=250")
    assert sum(1 for m in context.messages if m.role == "assistant") == 3


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_retry_backoff_waits_in_virtual_time(backend: str) -> None:
    provider = ScriptedProvider(
        [ProviderError("rate_limit", "slow down", retry_after=45.0), "fine"]
    )
    config = AgentLoopConfig(provider=provider, retry=RetryPolicy(jitter=0.0))
    context = AgentContext()

    async def main() -> float:
        start = anyio.current_time()
        await agent_loop(["hi"], context, config)
        return anyio.current_time() - start

    assert _run_on_mock_clock(backend, main) == pytest.approx(45.0)
    assert context.messages[-1].text == "fine"
