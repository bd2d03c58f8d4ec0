"""Hostile or broken servers: a key echoed in a mid-stream error never leaves the process."""

from __future__ import annotations

import pytest
from tests.testing.wire_cases import FORMATS

from treadle import AgentContext, AgentLoopConfig, agent_loop
from treadle.loop import RetryPolicy
from treadle.providers import ProviderError
from treadle.testing import FakeTransport, StreamError

pytestmark = pytest.mark.anyio
KEY = "test-key-ECHOED-0123456789abcdef"


@pytest.mark.parametrize("fmt", FORMATS)
async def test_a_key_echoed_in_a_mid_stream_error_is_scrubbed(fmt: str) -> None:
    echo = f"invalid credentials {KEY} for this model"
    fake = FakeTransport(fmt, [StreamError(kind="server", error=echo)] * 2)
    provider = fake.provider(api_key=KEY)
    config = AgentLoopConfig(provider=provider, retry=RetryPolicy(max_retries=0))
    context = AgentContext()
    new = await agent_loop("hi", context, config)
    error = new[-1].error  # type: ignore[union-attr]
    assert error is not None and "invalid credentials" in error.message
    assert KEY not in error.message
    assert KEY not in context.model_dump_json()
    with pytest.raises(ProviderError) as raised:  # and straight from the adapter too
        async for _ in provider.stream(
            __import__("treadle").ModelRequest(model="m", messages=new[:1])
        ):
            pass
    assert "invalid credentials" in str(raised.value)
    assert KEY not in str(raised.value) and KEY not in repr(raised.value)
