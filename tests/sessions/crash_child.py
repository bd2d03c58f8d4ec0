"""An agent that works on a stored session until it is killed (driven by test_crash.py).

``python crash_child.py LOCATION SESSION_ID PROMPTS``: resumes (or creates) the session, then
runs PROMPTS prompts with tools, printing one JSON line per ``message_end`` it receives.
Every prompt carries the same PDF and every tool result a file of its own: files are kept
once, beside the records, and a kill must never leave a record whose file is missing.
"""

from __future__ import annotations

import json
import sys
import uuid

import anyio

from treadle import Agent, AssistantMessage, ModelRequest, TextContent, ToolCall, UserMessage, tool
from treadle.sessions import open_store
from treadle.testing import ScriptedProvider
from treadle.types import FileContent

# the same PDF on every prompt (stored once), and a file of its own from each tool call
REPORT = b"%PDF-1.7\n1 0 obj <</Type /Page>> endobj\n" + bytes(range(256)) * 64


@tool(category="info")
async def work(step: int) -> list[object]:
    """Pretend to work for a moment."""
    await anyio.sleep(0.003 * (step % 4))
    made = FileContent.from_bytes(b"step,%d\n" % step * 50, name=f"step{step}.csv")
    return [f"step {step} done", made]


def respond(request: ModelRequest) -> AssistantMessage:
    """After a prompt: two parallel calls, then one more, then an answer."""
    rounds = 0
    for message in reversed(request.messages):
        if message.role == "user":
            break
        rounds += message.role == "assistant"
    if rounds >= 2:
        return AssistantMessage(content=[TextContent(text="all done")])
    size = len(request.messages)
    return AssistantMessage(
        content=[
            TextContent(text=f"round {rounds}"),
            *(
                ToolCall(id=uuid.uuid4().hex, name="work", arguments={"step": size + i})
                for i in range(2 - rounds)
            ),
        ]
    )


def provider(delay: float = 0.001) -> ScriptedProvider:
    return ScriptedProvider([respond] * 1000, delay=delay)


async def main(location: str, session_id: str, prompts: int) -> None:
    agent: Agent[None] = Agent(
        provider(), tools=[work], store=open_store(location), session_id=session_id
    )
    print(json.dumps({"resumed": len(agent.messages)}), flush=True)
    for i in range(prompts):
        report = FileContent.from_bytes(REPORT, name="report.pdf")
        async with agent.stream(UserMessage.of(f"task {i}", files=[report])) as events:
            async for event in events:
                if event.type == "message_end":
                    print(json.dumps({"end": event.message.model_dump(mode="json")}), flush=True)
    print(json.dumps({"done": len(agent.messages)}), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
