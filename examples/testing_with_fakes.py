"""Test an agent against a fake provider server: a pytest file that also runs as a script.

    pytest examples/testing_with_fakes.py      # as tests (anyio's pytest plugin)
    python examples/testing_with_fakes.py      # as a script: runs the same tests

Everything is offline. The "model" is `WireFake.openai([...])`: an httpx transport that
answers with the real OpenAI Chat Completions bytes (SSE chunks, tool-call argument
fragments, usage, `[DONE]`, error bodies with Retry-After) from a script. So the real
`OpenAIChat` adapter, the loop's retries and the tools all run exactly as in production;
only the network is fake. The same fakes exist for Anthropic, OpenAI Responses, Gemini and
Ollama (see docs/testing.md).
"""

from __future__ import annotations

import inspect
import tempfile
from pathlib import Path

import anyio

from treadle import Agent, AssistantMessage, ToolCall, tool
from treadle.loop import RetryPolicy
from treadle.providers import OpenAIChat
from treadle.testing import Cassette, Fail, Slow, Truncate, WireFake, serve
from treadle.types import ProviderRetry

try:  # pytest is only needed to run this file as tests
    import pytest

    pytestmark = pytest.mark.anyio
except ImportError:  # pragma: no cover
    pass

# ---------------------------------------------------------------- the code under test

RATES = {("EUR", "USD"): 1.08, ("USD", "EUR"): 0.93}


@tool(category="info")
def convert(amount: float, source: str, target: str) -> str:
    """Convert money between currencies.

    Args:
        amount: how much
        source: ISO code of the currency to convert from
        target: ISO code of the currency to convert to
    """
    return f"{amount * RATES[(source, target)]:.2f} {target}"


def make_agent(provider: OpenAIChat) -> Agent[None]:
    return Agent(
        provider,
        tools=[convert],
        system_prompt="You convert currencies. Always use the convert tool.",
        retry=RetryPolicy(initial_delay_s=0.01, max_delay_s=0.05),  # keep tests fast
    )


def asks_to_convert(amount: float, source: str, target: str) -> AssistantMessage:
    """What the model says when it wants the tool run."""
    arguments = {"amount": amount, "source": source, "target": target}
    return AssistantMessage(content=[ToolCall(id="call_1", name="convert", arguments=arguments)])


# ---------------------------------------------------------------- the tests


async def test_agent_calls_the_tool_and_answers() -> None:
    fake = WireFake.openai([asks_to_convert(100, "EUR", "USD"), "100 EUR is 108.00 USD."])
    agent = make_agent(OpenAIChat("gpt-4o-mini", api_key="test", client=fake.client()))

    result = await agent.run("How much is 100 EUR in dollars?")

    assert result.ok and result.text == "100 EUR is 108.00 USD."
    # What went over the wire: the second request carried the tool's answer.
    tool_message = fake.requests[1].json["messages"][-1]
    assert tool_message == {"role": "tool", "tool_call_id": "call_1", "content": "108.00 USD"}
    fake.assert_done()  # every scripted response was used, nothing more was asked


async def test_agent_rides_out_rate_limits_and_cut_streams() -> None:
    fake = WireFake.openai(
        [
            Fail(429, retry_after=0.01),  # HTTP 429 with a Retry-After header
            Truncate("The answer is", after=2),  # the stream stops before it completes
            "Converted: 50 USD is 46.50 EUR.",
        ]
    )
    agent = make_agent(OpenAIChat("gpt-4o-mini", api_key="test", client=fake.client()))

    retries: list[str] = []
    async with agent.stream("50 USD in EUR?") as events:
        async for event in events:
            if isinstance(event, ProviderRetry):
                retries.append(event.error_kind)

    assert retries == ["rate_limit", "truncated_stream"]
    assert agent.messages[-1].text == "Converted: 50 USD is 46.50 EUR."  # type: ignore[union-attr]
    assert len(fake.requests) == 3


async def test_agent_over_a_real_socket() -> None:
    fake = WireFake.openai([Slow("Streaming, one word at a time.", delay=0.005)])
    async with serve(fake) as url:  # a real HTTP/1.1 server on 127.0.0.1
        provider = OpenAIChat("gpt-4o-mini", api_key="test", base_url=f"{url}/v1")
        result = await make_agent(provider).run("Say something.")
        await provider.aclose()
    assert result.text == "Streaming, one word at a time."


async def test_recorded_exchanges_replay_from_a_cassette() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "convert.json"
        # Record once. Here the "real" API is a fake; in a real project this would be the
        # provider itself, with a real key, the first time the test runs.
        upstream = WireFake.openai([asks_to_convert(10, "EUR", "USD"), "10.80 USD."])
        recording = Cassette(path)
        provider = OpenAIChat(
            "gpt-4o-mini", api_key="sk-real-key", client=recording.client(upstream)
        )
        first = await make_agent(provider).run("10 EUR in USD?")
        assert "sk-real-key" not in path.read_text()  # keys never reach the file

        # Every later run replays from the file, with no network and no key.
        replaying = Cassette(path)
        provider = OpenAIChat("gpt-4o-mini", api_key="unused", client=replaying.client())
        again = await make_agent(provider).run("10 EUR in USD?")
        assert again.text == first.text == "10.80 USD."
        replaying.assert_all_played()


# ---------------------------------------------------------------- as a script


async def main() -> None:
    tests = [
        (name, test)
        for name, test in globals().items()
        if name.startswith("test_") and inspect.iscoroutinefunction(test)
    ]
    for name, test in tests:
        await test()
        print(f"  ok  {name}")
    print(f"{len(tests)} tests passed (offline: the model is a wire-level fake, no network).")


if __name__ == "__main__":
    anyio.run(main)
