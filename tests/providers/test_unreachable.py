"""A server that is not running: one clear error at once, naming the URL and what to check."""

from __future__ import annotations

import socket
import time

import pytest

from treadle import AgentContext, AgentLoopConfig, UserMessage, agent_loop
from treadle.loop import RetryPolicy
from treadle.providers import Ollama, OpenAIChat, ProviderError

pytestmark = pytest.mark.anyio


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_ollama_not_running_says_so_and_is_not_retried() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    provider = Ollama("llama3.2", base_url=url)
    config = AgentLoopConfig(provider=provider, retry=RetryPolicy(initial_delay_s=2.0))
    started = time.monotonic()
    new = await agent_loop([UserMessage.of("hi")], AgentContext(), config)
    elapsed = time.monotonic() - started
    await provider.aclose()
    error = new[-1].error  # type: ignore[union-attr]
    assert error is not None and error.kind == "unreachable"
    assert url in error.message and "ollama serve" in error.message
    assert elapsed < 2.0  # no back-off sleep happened (the first one alone is 2 s)


async def test_openai_compatible_server_down_names_its_url() -> None:
    url = f"http://localhost:{closed_port()}/v1"
    provider = OpenAIChat("m", base_url=url, api_key="k")
    with pytest.raises(ProviderError) as failed:
        async for _ in provider.stream(
            __import__("treadle").ModelRequest(messages=[UserMessage.of("hi")])
        ):
            pass
    await provider.aclose()
    assert failed.value.kind == "unreachable" and not failed.value.retryable
    assert "nothing is listening at" in failed.value.message and url in failed.value.message


async def test_a_refused_remote_host_is_still_retryable_network() -> None:
    import httpx

    from treadle.providers._errors import transport_error

    exc = httpx.ConnectError("[Errno 111] Connection refused")
    error = transport_error(exc, "openai", "https://api.example.com/v1")
    assert error.kind == "network" and error.retryable
    assert "https://api.example.com/v1" in error.message
