"""Two treadle agents talking A2A over HTTP on this machine: a "janitor" agent served with
``a2a_app`` (its delete tool needs approval), and a lead agent that calls it as a tool
through ``A2AAgent``. The janitor's answer shows in the lead's event tree as a sub-agent;
its approval request is decided by the lead's approval handler. Scripted models: no key,
no network beyond 127.0.0.1. Needs ``pip install 'treadle[a2a]'``."""

from __future__ import annotations

import secrets
import socket

import anyio
import uvicorn

from treadle import Agent, Ask, AssistantMessage, Hooks, RunHandle, TextContent, ToolCall, tool
from treadle.a2a import A2AAgent, a2a_app
from treadle.testing import ScriptedProvider

print("(offline: scripted models on both sides of the A2A connection)")


@tool(category="edit")
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"{path} deleted"


class AskBeforeDeleting(Hooks):
    """The janitor's own policy: a deletion needs someone's approval."""

    async def before_tool_call(self, run: RunHandle, call: ToolCall) -> Ask | None:
        return Ask(prompt="Delete this file?") if call.name == "delete_file" else None


janitor = Agent(
    ScriptedProvider(
        [
            AssistantMessage(
                content=[ToolCall(id="d1", name="delete_file", arguments={"path": "old.log"})]
            ),
            AssistantMessage(content=[TextContent(text="old.log is gone.")]),
        ],
        delay=0.002,
    ),
    tools=[delete_file],
    hooks=[AskBeforeDeleting()],
    name="janitor",
)


async def approve(run: RunHandle, call: ToolCall, ask: Ask) -> bool:
    """The lead's approval handler: asked for the janitor's deletion."""
    print(f"  approval asked: {call.name}({call.arguments}) — {ask.prompt} → yes")
    return True


async def main() -> None:
    token = secrets.token_urlsafe(16)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            a2a_app(janitor, token=token), host="127.0.0.1", port=port, log_level="warning"
        )
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        while not server.started:  # noqa: ASYNC110 (uvicorn offers a flag, not an event)
            await anyio.sleep(0.02)
        async with A2AAgent(f"http://127.0.0.1:{port}", token=token) as remote:
            lead = Agent(
                ScriptedProvider(
                    [
                        AssistantMessage(
                            content=[
                                ToolCall(
                                    id="j1",
                                    name="janitor",
                                    arguments={"task": "Delete old.log, please."},
                                )
                            ]
                        ),
                        AssistantMessage(content=[TextContent(text="The janitor cleaned up.")]),
                    ],
                    delay=0.002,
                ),
                tools=[remote],  # the remote agent's card names the tool: "janitor"
                approval_handler=approve,
            )
            async with lead.stream("Clean up my logs.") as events:
                async for event in events:
                    indent = "  " * event.depth
                    if event.type in ("agent_start", "agent_end", "tool_execution_start"):
                        print(f"{indent}{event.type}", getattr(event, "tool_name", ""))
                    elif event.type == "message_end" and event.message.role == "assistant":
                        if event.message.text:
                            print(f"{indent}said: {event.message.text}")
            print("result:", events.result.text)
        server.should_exit = True


if __name__ == "__main__":
    anyio.run(main)  # uvicorn and the a2a-sdk server run on asyncio
