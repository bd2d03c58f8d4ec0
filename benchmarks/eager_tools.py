"""Eager tool calls: wall time saved when tools start while the model is still streaming.

A paced fake Anthropic server (``treadle.testing.serve`` over a real loopback socket, one
streamed event every ``--token-ms`` milliseconds) answers each run with ``--calls`` tool
calls to ``fetch`` (each takes ``--tool-ms`` milliseconds, like a web request) followed by
``--words`` words of text, then a short final answer. The same run is timed with ``fetch``
marked ``eager=True`` and without, interleaved, and the mean wall time of each is printed.

    python benchmarks/eager_tools.py [--runs 5] [--token-ms 5] [--tool-ms 150] [--calls 3]

Without eager tools a run takes about stream + tools + final answer; with them the tools
overlap the rest of the stream, so about ``--tool-ms`` is saved per tool turn (as long as
the text after the calls streams for longer than a tool takes).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import anyio

from treadle import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    TextContent,
    ToolCall,
    agent_loop,
    tool,
)
from treadle.providers import Anthropic
from treadle.testing import WireFake, serve
from treadle.types import ToolExecutionStart


def make_tool(eager: bool, latency: float) -> Any:
    @tool(name="fetch", eager=eager, category="info")
    async def fetch(url: str) -> str:
        """Fetch a web page.

        Args:
            url: the address
        """
        await anyio.sleep(latency)
        return f"<html>the page at {url}</html>"

    return fetch


def answer(calls: int, words: int) -> AssistantMessage:
    content: list[Any] = [
        ToolCall(id=f"toolu_{i}", name="fetch", arguments={"url": f"https://example.com/{i}"})
        for i in range(calls)
    ]
    text = " ".join(f"word{i}" for i in range(words))
    content.append(TextContent(text=f"I am fetching those pages now. {text}"))
    return AssistantMessage(content=content)


async def one_run(eager: bool, opts: argparse.Namespace) -> tuple[float, float]:
    """(wall time of the run, seconds from the run's start to the first tool start)."""
    fake = WireFake.anthropic(
        [answer(opts.calls, opts.words), "The pages say hello."],
        delay=opts.token_ms / 1000,
    )
    first_tool: list[float] = []
    async with serve(fake) as base:
        provider = Anthropic("claude-sonnet-4-5", api_key="test", base_url=base)
        config = AgentLoopConfig(provider=provider)
        context = AgentContext(tools=[make_tool(eager, opts.tool_ms / 1000)])
        send, receive = anyio.create_memory_object_stream[Any](1000)
        started = time.perf_counter()

        async def consume() -> None:
            async with receive:
                async for event in receive:
                    if isinstance(event, ToolExecutionStart) and not first_tool:
                        first_tool.append(time.perf_counter() - started)

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            async with send:
                messages = await agent_loop("Fetch the pages.", context, config, send)
        wall = time.perf_counter() - started
        await provider.aclose()
    results = [m for m in messages if m.role == "tool_result"]
    assert len(results) == opts.calls and not any(r.is_error for r in results), messages
    assert messages[-1].text == "The pages say hello.", messages[-1]
    return wall, first_tool[0]


async def main(opts: argparse.Namespace) -> None:
    timings: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    await one_run(True, opts)  # warm up (imports, first connection)
    for _ in range(opts.runs):
        for eager in (False, True):
            timings[eager].append(await one_run(eager, opts))
    print(
        f"paced fake server: {opts.token_ms:g} ms per streamed event; {opts.calls} tool calls "
        f"of {opts.tool_ms:g} ms each, then {opts.words} words of text; {opts.runs} runs each"
    )
    means = {}
    for eager in (False, True):
        walls = [w for w, _ in timings[eager]]
        firsts = [f for _, f in timings[eager]]
        means[eager] = statistics.mean(walls)
        label = "eager on " if eager else "eager off"
        print(
            f"{label}: wall {means[eager] * 1000:7.1f} ms mean "
            f"(min {min(walls) * 1000:.1f}, max {max(walls) * 1000:.1f}); "
            f"first tool start at {statistics.mean(firsts) * 1000:.1f} ms"
        )
    saved = means[False] - means[True]
    print(f"saved    : {saved * 1000:7.1f} ms per run ({saved / means[False]:.0%})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--token-ms", type=float, default=5.0)
    parser.add_argument("--tool-ms", type=float, default=150.0)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--words", type=int, default=60)
    anyio.run(main, parser.parse_args())
