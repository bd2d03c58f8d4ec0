"""serve(): the wire fakes over a real loopback socket."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import httpx
import pytest
from tests.conformance.harness import check, run_recorded
from tests.testing.wire_cases import CALLS, collect, rich_message, same_message

from treadle import AgentContext, AgentLoopConfig, tool
from treadle.loop import RetryPolicy
from treadle.providers import ModelRequest, ProviderError
from treadle.providers.anthropic import Anthropic
from treadle.providers.gemini import Gemini
from treadle.providers.openai_chat import OpenAIChat
from treadle.testing import Fail, Slow, Truncate, WireFake, serve
from treadle.types import AssistantMessage, ProviderRetry, TextContent, UserMessage

pytestmark = pytest.mark.anyio


async def test_openai_adapter_over_a_real_socket() -> None:
    fake = WireFake.openai([rich_message("openai"), "Second answer."])
    async with serve(fake) as url:
        assert url.startswith("http://127.0.0.1:")
        provider = OpenAIChat("gpt-4o-mini", api_key="k", base_url=f"{url}/v1")  # no client=
        try:
            _, first = await collect(provider)
            same_message(first, rich_message("openai"))
            _, second = await collect(provider)
            assert second.text == "Second answer."
        finally:
            await provider.aclose()
    # Both requests came over one kept-alive connection, to the real path.
    assert [r.connection for r in fake.requests] == [1, 1]
    assert fake.requests[0].path == "/v1/chat/completions"
    assert fake.requests[0].headers["authorization"] == "Bearer k"


async def test_agent_loop_over_a_real_socket() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    first = AssistantMessage(content=[CALLS[0]])
    fake = WireFake.anthropic([first, Fail(529), "It is 5."])
    async with serve(fake) as url:
        provider = Anthropic("claude-sonnet-4-5", api_key="k", base_url=url)
        context = AgentContext(tools=[add])
        config = AgentLoopConfig(provider=provider, retry=RetryPolicy(initial_delay_s=0.001))
        rec = await run_recorded(["2+3?"], context, config)
        await provider.aclose()
    check(rec)
    assert rec.end.reason == "completed"
    assert [r.error_kind for r in rec.of_type(ProviderRetry)] == ["overloaded"]
    assert context.messages[-1].text == "It is 5."  # type: ignore[union-attr]
    assert [r.path for r in fake.requests] == ["/v1/messages"] * 3


async def test_gemini_path_and_query_over_a_socket() -> None:
    fake = WireFake.gemini(["Hallo!"])
    async with serve(fake) as url:
        provider = Gemini("gemini-2.5-pro", api_key="k", base_url=url)
        _, message = await collect(provider)
        await provider.aclose()
    assert message.text == "Hallo!" and message.model == "gemini-2.5-pro"
    assert fake.requests[0].query == "alt=sse"
    assert fake.requests[0].headers["x-goog-api-key"] == "k"


async def test_errors_retry_after_and_dropped_connections() -> None:
    fake = WireFake.openai([Fail(429, retry_after=2), Truncate(after=2, reset=True), "ok"])
    async with serve(fake) as url:
        provider = OpenAIChat("gpt-4o-mini", api_key="k", base_url=url)
        with pytest.raises(ProviderError) as limited:
            await collect(provider)
        assert (limited.value.kind, limited.value.retry_after) == ("rate_limit", 2.0)
        with pytest.raises(ProviderError) as dropped:
            await collect(provider)
        assert dropped.value.kind == "network"
        _, message = await collect(provider)  # a fresh connection after the drop
        await provider.aclose()
    assert message.text == "ok"
    assert [r.connection for r in fake.requests] == [1, 1, 2]


async def test_slow_start_hits_the_clients_read_timeout() -> None:
    fake = WireFake.openai([Slow("late", start_delay=2.0)])
    async with serve(fake) as url:
        provider = OpenAIChat("gpt-4o-mini", api_key="k", base_url=url, timeout=httpx.Timeout(0.05))
        with pytest.raises(ProviderError) as caught:
            await collect(provider)
        await provider.aclose()
    assert caught.value.kind == "timeout"


async def test_streams_are_chunked_and_paced() -> None:
    fake = WireFake.ollama([Slow("one two three", delay=0.02)])
    async with serve(fake) as url, httpx.AsyncClient() as client:
        async with client.stream("POST", f"{url}/api/chat", json={"model": "m"}) as response:
            assert response.headers["transfer-encoding"] == "chunked"
            assert response.headers["content-type"] == "application/x-ndjson"
            arrivals = []
            async for _ in response.aiter_lines():
                arrivals.append(anyio.current_time())
    assert len(arrivals) == 4  # three words and the done line
    assert arrivals[-1] - arrivals[0] >= 3 * 0.02 * 0.9


async def test_chunked_request_bodies_and_connection_close() -> None:
    fake = WireFake.openai(["a", "b"])

    async def body() -> AsyncIterator[bytes]:
        yield b'{"model": "m", '
        yield b'"stream": false}'

    async with serve(fake) as url, httpx.AsyncClient() as client:
        first = await client.post(f"{url}/v1/chat/completions", content=body())
        second = await client.post(
            f"{url}/v1/chat/completions", json={"stream": False}, headers={"connection": "close"}
        )
    assert first.json()["choices"][0]["message"]["content"] == "a"
    assert second.headers["connection"] == "close" and second.json()["choices"]
    assert fake.requests[0].json == {"model": "m", "stream": False}


async def test_leaving_the_block_closes_open_connections() -> None:
    fake = WireFake.openai([Slow("never finishes " * 50, delay=0.05)])
    async with httpx.AsyncClient() as client:
        async with serve(fake) as url:
            response = await client.send(
                client.build_request("POST", f"{url}/v1/chat/completions", json={"stream": True}),
                stream=True,
            )
        with pytest.raises(httpx.HTTPError):  # the server went away mid-body
            await response.aread()
        await response.aclose()


async def test_exceptions_and_cancellation_pass_through() -> None:
    fake = WireFake.openai([])
    with pytest.raises(KeyError):  # as itself, not wrapped in an exception group
        async with serve(fake):
            raise KeyError("boom")
    with anyio.move_on_after(0.02) as scope:
        async with serve(fake):
            await anyio.sleep(5)
    assert scope.cancelled_caught


async def test_loopback_only() -> None:
    with pytest.raises(ValueError, match="loopback"):
        async with serve(WireFake.openai([]), host="0.0.0.0"):
            pass


async def test_a_broken_responder_gets_a_500() -> None:
    def broken(request: object) -> AssistantMessage:
        raise RuntimeError("bug in the test's responder")

    fake = WireFake.openai([broken, "fine"])
    async with serve(fake) as url, httpx.AsyncClient() as client:
        response = await client.post(f"{url}/v1/chat/completions", json={"stream": False})
        assert response.status_code == 500 and "bug in the test's responder" in response.text
        again = await client.post(f"{url}/v1/chat/completions", json={"stream": False})
        assert again.json()["choices"][0]["message"]["content"] == "fine"


async def test_fake_provider_helper_can_use_the_socket() -> None:
    fake = WireFake.responses([AssistantMessage(content=[TextContent(text="via socket")])])
    async with serve(fake) as url:
        provider = fake.provider(client=None, base_url=f"{url}/v1")
        _, message = await collect(provider, ModelRequest(messages=[UserMessage.of("x")]))
        await provider.aclose()
    assert message.text == "via socket" and fake.requests[0].connection == 1


async def test_a_client_dying_mid_request_leaves_the_server_serving() -> None:
    fake = WireFake.openai(["still here"])
    async with serve(fake) as url:
        host, port = url.removeprefix("http://").split(":")
        stream = await anyio.connect_tcp(host, int(port))
        head = (
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            'content-length: 500\r\n\r\n{"model": '
        )
        await stream.send(head.encode())
        await stream.aclose()  # gone before the body it announced
        await anyio.sleep(0.05)
        provider = OpenAIChat("gpt-4o-mini", api_key="sk-test", base_url=url + "/v1")
        try:
            events = [
                e async for e in provider.stream(ModelRequest(messages=[UserMessage.of("hi")]))
            ]
        finally:
            await provider.aclose()
    assert events[-1].message.text == "still here"  # type: ignore[union-attr]
