"""A key in a base_url's query string never reaches the logs (httpx logs every request URL)."""

from __future__ import annotations

import logging

import pytest

from treadle import AgentContext, AgentLoopConfig, agent_loop
from treadle.providers import OpenAIChat
from treadle.testing import WireFake, serve

pytestmark = pytest.mark.anyio
KEY = "test-query-key-0123456789abcdef"


async def test_a_query_key_is_masked_in_httpx_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    fake = WireFake.openai("hi")
    async with serve(fake) as url:
        provider = OpenAIChat("m", base_url=f"{url}/v1?api-key={KEY}&region=eu", api_key="k")
        with caplog.at_level(logging.INFO, logger="httpx"):
            await agent_loop("hello", AgentContext(), AgentLoopConfig(provider=provider))
        await provider.aclose()
    lines = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert lines and all(KEY not in line for line in lines)
    assert any("region=eu" in line and "REDACTED" in line for line in lines)
    assert KEY in fake.requests[0].url  # the server still got it
