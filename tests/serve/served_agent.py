"""The agents ``treadle serve`` serves in these tests: a keyword-driven offline model, so every
path of the protocols shows (``treadle serve tests.serve.served_agent:agent ...``).

- "weather in X": the agent's own tool ``weather`` runs, then the answer.
- "colour": calls the client's tool ``pick_colour`` when the client offers it.
- "delete X": ``delete_file``, which a hook asks a person about (``Ask``).
- "slow" (or "slow N"): ``slow_task``, which sleeps 30 (or N) seconds: long enough to cancel
  or drop the connection while it runs.
- "long": a long answer streamed in paced pieces.
- "fail": the model fails (a provider error).
- anything else: "Hello! You said: ...".

``SERVE_TEST_LOG`` names a file where each run's end is written as a JSON line (its reason,
and the calls of its history left without a result), and the slow tool writes ``started`` /
``cancelled``: what the tests read to see what the server did.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from typing import Any

import anyio

from treadle import Agent, Ask, Hooks, RunHandle, ToolCall, tool
from treadle.loop import RetryPolicy
from treadle.providers import ModelRequest, ProviderError, StreamEvent
from treadle.testing import ScriptedProvider
from treadle.types import (
    AgentEnd,
    AgentEvent,
    AssistantMessage,
    TextContent,
    ToolResultMessage,
    UserMessage,
)

LONG = " ".join(f"word{n}" for n in range(200)) + "."


def note(entry: dict[str, Any]) -> None:
    path = os.environ.get("SERVE_TEST_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


@tool(category="info")
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny and 21 °C in {city}."


@tool
def delete_file(path: str) -> str:
    """Delete a file (a person approves it first)."""
    note({"deleted": path})
    return f"Deleted {path}."


@tool(category="info")
async def slow_task(topic: str, seconds: float = 30) -> str:
    """Work on a topic for a long time."""
    note({"slow": "started"})
    try:
        await anyio.sleep(seconds)
    except BaseException:
        note({"slow": "cancelled"})
        raise
    return f"{topic}: done"


def _reply(request: ModelRequest) -> AssistantMessage | ProviderError | str:
    last = request.messages[-1] if request.messages else None
    if isinstance(last, ToolResultMessage):
        results = [m.text for m in request.messages if isinstance(m, ToolResultMessage)]
        return f"Done: {results[-1]}"
    text = last.text if isinstance(last, UserMessage) else ""
    offered = {spec.name for spec in request.tools}
    city = re.findall(r"weather in (\w+)", text)
    if city:
        call = ToolCall(id="call_weather", name="weather", arguments={"city": city[0]})
        return AssistantMessage(content=[TextContent(text="Let me look."), call])
    if "colour" in text and "pick_colour" in offered:
        call = ToolCall(id="call_pick", name="pick_colour", arguments={"among": ["red", "blue"]})
        return AssistantMessage(content=[call])
    path = re.findall(r"delete (\S+)", text)
    if path:
        call = ToolCall(id="call_delete", name="delete_file", arguments={"path": path[0]})
        return AssistantMessage(content=[call])
    if "slow" in text:
        seconds = re.findall(r"slow (\d+)", text)
        arguments = {"topic": "it", "seconds": float(seconds[0]) if seconds else 30}
        return AssistantMessage(
            content=[ToolCall(id="call_slow", name="slow_task", arguments=arguments)]
        )
    if "fail" in text:
        return ProviderError("bad_request", "the scripted model refuses", provider="scripted")
    if "long" in text:
        return LONG
    return f"Hello! You said: {text}"


class KeywordModel:
    """A provider answering each request by its keywords (``_reply``), streamed as a real one
    is (through a one-answer ScriptedProvider)."""

    name = "scripted"
    model = "keyword-model"

    def stream(self, request: ModelRequest, *, cancel: Any = None) -> AsyncIterator[StreamEvent]:
        reply = _reply(request)
        long = isinstance(reply, str) and reply == LONG
        script = ScriptedProvider(
            [reply],
            name=self.name,
            model=self.model,
            chunks=40 if long else 3,
            delay=float(os.environ.get("SERVE_TEST_DELAY", "0.05")) if long else 0.0,
        )
        return script.stream(request, cancel=cancel)


class AskBeforeDeleting(Hooks):
    async def before_tool_call(self, run: RunHandle, call: ToolCall) -> Ask | None:
        return Ask("Delete this file?") if call.name == "delete_file" else None

    def on_event(self, run: RunHandle, event: AgentEvent) -> None:
        if isinstance(event, AgentEnd) and event.depth == 0:
            answered = {
                m.tool_call_id for m in run.context.messages if isinstance(m, ToolResultMessage)
            }
            calls = [
                c.id
                for m in run.context.messages
                if isinstance(m, AssistantMessage)
                for c in m.tool_calls
            ]
            note(
                {
                    "end": event.reason,
                    "unanswered": [c for c in calls if c not in answered],
                    "pending": list(event.pending_tool_calls),
                }
            )


agent = Agent(
    KeywordModel(),
    tools=[weather, delete_file, slow_task],
    hooks=[AskBeforeDeleting()],
    name="assistant",
    retry=RetryPolicy(max_retries=0),
)
agent.description = "A helpful assistant with a weather tool."

helper = Agent(ScriptedProvider(["Helper here."] * 1000), name="helper")
helper.description = "Says hello."
