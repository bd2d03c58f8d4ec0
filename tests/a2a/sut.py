"""A treadle agent served over A2A for conformance runs (the A2A TCK, the a2a-sdk client
in another process): ``python tests/a2a/sut.py PORT [TOKEN]``.

Its model answers by the prompt: ``slow`` streams 100 pieces over a second (cancels,
dropped connections), ``delete <name>`` calls a tool that needs approval, ``wait`` a tool
that waits a minute, ``ask`` the client's own tool (a question), ``last result`` says what
the history's last tool result was; anything else gets a short answer.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio

from treadle import Agent, Ask, Hooks, tool
from treadle.a2a import a2a_app
from treadle.providers import (
    ModelRequest,
    StreamDone,
    StreamEvent,
    StreamStart,
    TextDelta,
    TextEnd,
    TextStart,
)
from treadle.tools import ExternalTool
from treadle.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, UserMessage

DELETED: list[str] = []  # what delete_file really did, reported by "deleted?"


@tool(category="edit")
def delete_file(path: str) -> str:
    """Delete a file."""
    DELETED.append(path)
    return f"deleted {path}"


@tool(category="exec")
async def wait_a_minute() -> str:
    """Wait for a minute."""
    await anyio.sleep(60)
    return "waited"


ask_user = ExternalTool(
    "ask_user", "Ask the user.", {"type": "object", "properties": {"q": {"type": "string"}}}
)


class AskBeforeDeleting(Hooks):
    async def before_tool_call(self, run: Any, call: ToolCall) -> Any:
        return Ask(prompt="Delete this file?") if call.name == "delete_file" else None


class Echo:
    """A model that answers from the last message (no network, no key)."""

    name = "echo"
    model = "echo"

    async def stream(
        self, request: ModelRequest, *, cancel: Any = None
    ) -> AsyncIterator[StreamEvent]:
        last = request.messages[-1]
        yield StreamStart(model="echo")
        if isinstance(last, ToolResultMessage):
            pieces = [f"Tool said: {last.text}"]
        else:
            text = last.text if isinstance(last, UserMessage) else ""
            call_id = f"call-{len(request.messages)}"
            call = None
            if text.startswith("delete "):
                path = text.removeprefix("delete ").strip()
                call = ToolCall(id=call_id, name="delete_file", arguments={"path": path})
            elif text == "wait":
                call = ToolCall(id=call_id, name="wait_a_minute", arguments={})
            elif text == "ask":
                call = ToolCall(id=call_id, name="ask_user", arguments={"q": "Which city?"})
            if call is not None:
                yield StreamDone(message=AssistantMessage(content=[call], model="echo"))
                return
            if text == "last result":
                found = [m for m in request.messages if isinstance(m, ToolResultMessage)]
                last_result = found[-1] if found else None
                pieces = [
                    f"cancelled={last_result.cancelled} text={last_result.text}"
                    if last_result is not None
                    else "no tool result"
                ]
            elif text == "deleted?":
                pieces = [f"deleted: {DELETED}"]
            elif text.startswith("slow"):
                pieces = [f"piece {i} " for i in range(100)]
            else:
                pieces = ["Hello! ", f"You said: {text}"]
        yield TextStart(index=0)
        for piece in pieces:
            if len(pieces) > 2:
                await anyio.sleep(0.01)  # "slow": a second in all
            yield TextDelta(index=0, text=piece)
        yield TextEnd(index=0)
        message = AssistantMessage(content=[TextContent(text="".join(pieces))], model="echo")
        yield StreamDone(message=message)


def make_agent() -> Agent[None]:
    return Agent(
        Echo(),
        tools=[delete_file, wait_a_minute, ask_user],
        hooks=[AskBeforeDeleting()],
        name="echo_agent",
    )


if __name__ == "__main__":
    import os

    import uvicorn

    port = int(sys.argv[1])
    token = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("A2A_TEST_TOKEN")
    app = a2a_app(make_agent(), token=token)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
