"""treadle on the loop-overhead harness (``benchmarks/kit/common.py``).

Runs the harness's scenario (tool calls to ``add``, then a streamed final text) through
``agent_loop`` + ``OpenAIChat`` with a consumer task that re-assembles the streamed text
from ``message_update`` events, as an application would. Prints one JSON line.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "kit"))

import common  # first: the stdlib baseline is not charged to treadle
from common import add_impl, import_timer

with import_timer() as it:
    import anyio

    import treadle
    from treadle import AgentContext, AgentLoopConfig, UserMessage, agent_loop, tool
    from treadle.providers import OpenAIChat


def _extra(parser):  # type: ignore[no-untyped-def]
    parser.add_argument(
        "--no-events",
        dest="events",
        action="store_false",
        help="pass events=None (no consumer); the final text comes from the returned messages",
    )
    parser.add_argument(
        "--plain-consumer",
        dest="plain",
        action="store_true",
        help="consume as the README teaches: `async for event in receive` over the memory "
        "stream (not iter_events)",
    )
    parser.add_argument(
        "--async-tool",
        dest="async_tool",
        action="store_true",
        help="the add tool as `async def` (runs on the event loop, no worker-thread hop)",
    )


@tool(name="add", description=common.TOOL_DESCRIPTION)
def add_sync(a: int, b: int) -> int:
    return add_impl(a, b)


@tool(name="add", description=common.TOOL_DESCRIPTION)
async def add_async(a: int, b: int) -> int:
    return add_impl(a, b)


def runs(config, add, plain=False):  # type: ignore[no-untyped-def]
    """``(quiet, consumed)``: one run with ``events=None``, and one with a task reading
    every event (``iter_events``, or plain ``async for`` with ``plain``), a fresh context
    and stream per run."""

    async def run_quiet() -> str:
        context = AgentContext(system_prompt=common.INSTRUCTIONS, tools=[add])
        messages = await agent_loop([UserMessage.of(common.PROMPT)], context, config)
        return messages[-1].text  # type: ignore[union-attr]

    async def run_once() -> str:
        context = AgentContext(system_prompt=common.INSTRUCTIONS, tools=[add])
        send, receive = anyio.create_memory_object_stream(512)
        parts: list[str] = []

        async def consume() -> None:
            async with receive:
                async for event in receive if plain else treadle.iter_events(receive):
                    if event.type == "message_update" and event.delta.type == "text":
                        parts.append(event.delta.text)
                    elif event.type == "turn_start":
                        parts.clear()

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            async with send:
                await agent_loop([UserMessage.of(common.PROMPT)], context, config, send)
        return "".join(parts)

    return run_quiet, run_once


if __name__ == "__main__":
    args = common.parse_args(extra=_extra)

    async def setup():  # type: ignore[no-untyped-def]
        provider = OpenAIChat(
            args.model, base_url=args.base_url, api_key="sk-fake", stream=args.stream
        )
        config = AgentLoopConfig(provider=provider)
        quiet, consumed = runs(config, add_async if args.async_tool else add_sync, args.plain)
        return consumed if args.events else quiet

    common.main(
        args, library="treadle", version=treadle.__version__, import_s=it.seconds, setup=setup
    )
