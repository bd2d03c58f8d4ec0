"""Quick start: a two-tool agent that prints its event stream as it happens.

Run it with ``make demo`` (or ``python examples/quickstart.py``). Set ``TREADLE_MODEL`` to a
model string such as ``openai:gpt-4o-mini`` (with ``OPENAI_API_KEY``) or
``ollama:llama3.2`` to use a real model; with nothing configured it says so and runs against
a labelled offline model (a ScriptedProvider), so the loop, the tools and the events are real.
"""

from __future__ import annotations

import os
import re
import sys

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from treadle import (
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AssistantMessage,
    ModelRequest,
    Provider,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    agent_loop,
    tool,
)
from treadle.testing import ScriptedProvider

QUESTION = "What is 17 + 25, and what is the weather in Lisbon?"


@tool(category="info")
def add(a: float, b: float) -> float:
    """Add two numbers.

    Args:
        a: the first number
        b: the second number
    """
    return a + b


@tool(category="info")
async def weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: the city's name
    """
    await anyio.sleep(0.05)  # pretend to call a weather service
    return f"{city}: 21 °C, clear sky"


def offline_model() -> ScriptedProvider:
    """A stand-in model: asks for both tools, then answers from their results."""

    def plan(request: ModelRequest) -> AssistantMessage:
        question = request.messages[-1]
        text = question.text if isinstance(question, UserMessage) else ""
        numbers = [float(n) for n in re.findall(r"\d+(?:\.\d+)?", text)][:2] or [0.0, 0.0]
        city = (re.findall(r"weather in (\w+)", text) or ["Lisbon"])[0]
        return AssistantMessage(
            content=[
                TextContent(text="I'll use both tools at once."),
                ToolCall(id="call_add", name="add", arguments={"a": numbers[0], "b": numbers[-1]}),
                ToolCall(id="call_weather", name="weather", arguments={"city": city}),
            ]
        )

    def answer(request: ModelRequest) -> AssistantMessage:
        results = [m.text for m in request.messages if isinstance(m, ToolResultMessage)]
        return AssistantMessage(content=[TextContent(text="Here you go: " + "; ".join(results))])

    return ScriptedProvider([plan, answer], name="offline", model="offline-demo", delay=0.01)


def choose_provider() -> Provider:
    spec = os.environ.get("TREADLE_MODEL")
    if spec:
        from treadle.providers import get_provider

        return get_provider(spec)
    print(
        "No model configured (set TREADLE_MODEL, e.g. openai:gpt-4o-mini): "
        "using the OFFLINE demo model."
    )
    return offline_model()


async def render(events: MemoryObjectReceiveStream[AgentEvent]) -> None:
    """Print each event as it arrives: text streams inline, tools and turns on their own lines."""
    async with events:
        async for event in events:
            if event.type == "agent_start":
                print(
                    f"[agent_start] model={event.config['model']} "
                    f"provider={event.config['provider']}"
                )
            elif event.type == "turn_start":
                print(f"\n[turn {event.turn_index}] ({event.trigger.value})")
            elif event.type == "message_update" and event.delta.type == "text":
                print(event.delta.text, end="", flush=True)
            elif event.type == "message_end" and event.message.role == "assistant":
                print()
            elif event.type == "tool_execution_start":
                print(f"  -> {event.tool_name}({event.args})")
            elif event.type == "tool_execution_end":
                print(f"  <- {event.tool_name}: {event.result.text} ({event.duration_ms:.0f} ms)")
            elif event.type == "provider_retry":
                print(
                    f"  [retry {event.attempt}/{event.max_retries} "
                    f"in {event.delay_s:.1f}s: {event.message}]"
                )
            elif event.type == "agent_end":
                u = event.usage
                print(f"\n[agent_end] reason={event.reason} tokens in={u.input} out={u.output}")
                if event.error:
                    print(f"  error: {event.error.kind}: {event.error.message}")


async def main() -> int:
    provider = choose_provider()
    context = AgentContext(system_prompt="Be brief. Use the tools.", tools=[add, weather])
    config = AgentLoopConfig(provider=provider)
    question = " ".join(sys.argv[1:]) or QUESTION
    print(f"> {question}")
    send, receive = anyio.create_memory_object_stream[AgentEvent](256)
    async with anyio.create_task_group() as tg:
        tg.start_soon(render, receive)
        async with send:  # the caller closes the stream, not the loop
            await agent_loop([UserMessage.of(question)], context, config, send)
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
