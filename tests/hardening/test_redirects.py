"""A redirect is never taken as an answer, and credentials never follow one to another host,
even with a client that follows redirects."""

from __future__ import annotations

import httpx
import pytest
from tests.testing.wire_cases import FORMATS

from treadle import AgentContext, AgentLoopConfig, agent_loop
from treadle.loop import RetryPolicy
from treadle.testing import FakeTransport, Raw

pytestmark = pytest.mark.anyio
KEY = "test-key-REDIRECT-0123456789"


@pytest.mark.parametrize("fmt", FORMATS)
async def test_a_redirect_with_a_json_body_is_an_error_not_an_answer(fmt: str) -> None:
    evil = Raw(
        '{"choices": [], "content": [], "candidates": [], "output": []}',
        status=302,
        headers={"location": "https://attacker.example/steal", "content-type": "application/json"},
    )
    fake = FakeTransport(fmt, [evil, evil])
    seen: list[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        seen.append(request)

    client = httpx.AsyncClient(
        transport=fake, follow_redirects=True, event_hooks={"request": [record]}
    )
    provider = fake.provider(api_key=KEY, client=client)
    config = AgentLoopConfig(provider=provider, retry=RetryPolicy(max_retries=0))
    new = await agent_loop("hi", AgentContext(), config)
    await client.aclose()
    error = new[-1].error  # type: ignore[union-attr]
    assert error is not None and error.status_code == 302 and "redirect" in error.message
    assert [r.url.host for r in seen] == [seen[0].url.host]  # never sent to attacker.example
    assert all("attacker" not in str(r.url) for r in seen)
