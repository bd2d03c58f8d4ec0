"""A long session in a small context window: compaction keeps it going.

The assistant reads a week of server logs, three days per request, in one conversation.
Each log is long, so the history soon outgrows the (deliberately small) window; before a
model call that would not fit, the loop trims old tool outputs, summarises the middle of
the conversation with a model call and carries on. Every tool call stays answered and the
system prompt is never touched.

Offline (no TREADLE_MODEL) a scripted model plays the assistant and the summariser.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

import anyio

from treadle import (
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AssistantMessage,
    ModelRequest,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    agent_loop,
    tool,
)
from treadle.context import CompactionPolicy, validate_transcript
from treadle.providers import Provider, get_provider
from treadle.testing import ScriptedProvider, ScriptItem


def model_or_script(script: Sequence[ScriptItem]) -> Provider:
    """The model named by ``TREADLE_MODEL``; without one, a ScriptedProvider playing
    ``script`` (what a real model would plausibly answer), announced as offline: the
    example runs as it is, with no key and no network."""
    spec = os.environ.get("TREADLE_MODEL")
    if spec:
        return get_provider(spec)
    print("(offline: scripted model answers; set TREADLE_MODEL to use a real one)")
    return ScriptedProvider(script, name="offline", model="offline-script", delay=0.002)


WINDOW = 6_000  # tokens: small on purpose, so compaction shows up within a few requests


@tool(category="info")
def read_log(day: int) -> str:
    """Read the server log of one day (1-7)."""
    lines = [f"day {day} 0{h}:00 request ok latency={40 + (h * day) % 17}ms" for h in range(9)]
    lines += [f"day {day} 09:{m:02d} worker heartbeat, queue depth {m % 5}" for m in range(60)]
    if day % 3 == 0:
        lines.append(f"day {day} 23:59 ERROR disk /var at 9{day}% full")
    return "\n".join(lines)


# ---- the offline stand-in: what a model would plausibly say ----


def offline_model(request: ModelRequest) -> AssistantMessage:
    if not request.tools:  # the summary call
        text = " ".join(m.text for m in request.messages if isinstance(m, UserMessage))
        days = {int(d) for d in re.findall(r'"day": (\d)', text)}  # the calls
        for earlier in re.findall(r"Days read so far: \[([\d, ]*)\]", text):  # the summary so far
            days |= {int(d) for d in earlier.split(",") if d.strip()}
        errors = sorted(set(re.findall(r"ERROR disk /var at \d+% full", text)))
        return AssistantMessage(
            content="The user is reviewing server logs day by day. "
            f"Days read so far: {sorted(days)}. Errors found: {errors or 'none'}. "
            "Latencies were normal."
        )
    last_user = max(i for i, m in enumerate(request.messages) if isinstance(m, UserMessage))
    asked = request.messages[last_user].text  # type: ignore[union-attr]
    wanted = [int(d) for d in re.findall(r"\d", asked)]
    done = [m for m in request.messages[last_user:] if isinstance(m, ToolResultMessage)]
    if len(done) < len(wanted):
        day = wanted[len(done)]
        call = ToolCall(
            id=f"read_{day}_{len(request.messages)}", name="read_log", arguments={"day": day}
        )
        return AssistantMessage(content=[TextContent(text=f"Reading day {day}."), call])
    errors = [m.text.splitlines()[-1] for m in done if "ERROR" in m.text]
    return AssistantMessage(
        content=f"Days {', '.join(map(str, wanted))} look healthy"
        + (f", except: {'; '.join(errors)}." if errors else ".")
    )


async def show(receive: anyio.abc.ObjectReceiveStream[AgentEvent]) -> None:
    async with receive:
        async for event in receive:
            if event.type == "compaction_start":
                print(
                    f"    [compacting: about {event.tokens_before:,} tokens, reason {event.reason}]"
                )
            elif event.type == "compaction_end":
                print(
                    f"    [compacted with {event.strategy or 'nothing'}: "
                    f"{event.messages_before} -> {event.messages_after} messages, "
                    f"about {event.tokens_after:,} tokens]"
                )
                if event.summary:
                    print(f"    [summary: {event.summary}]")


async def main() -> None:
    provider = model_or_script([offline_model] * 500)
    context = AgentContext(
        system_prompt="You review server logs. Read each day you are asked about with the "
        "read_log tool, then answer in one sentence.",
        tools=[read_log],
    )
    config = AgentLoopConfig(
        provider=provider,
        compaction=CompactionPolicy(context_window=WINDOW),
    )
    appended = []
    for days in ("1 2 3", "4 5 6", "7 1 2", "3 4 5", "6 7 1", "2 3 4", "5 6 7", "1 3 5"):
        prompt = f"Check the logs of days {days}."
        print(f"> {prompt}")
        send, receive = anyio.create_memory_object_stream[AgentEvent](1000)
        async with anyio.create_task_group() as tg:
            tg.start_soon(show, receive)
            async with send:
                new = await agent_loop([prompt], context, config, send)
        appended += new
        answer = new[-1]
        print(f"  {answer.text if isinstance(answer, AssistantMessage) else answer}")

    print()
    print(f"messages appended over the session: {len(appended)}")
    print(f"messages in the working history now: {len(context.messages)}")
    valid = validate_transcript(context.messages) == []
    print(f"transcript valid (every tool call answered): {valid}")


if __name__ == "__main__":
    anyio.run(main)
