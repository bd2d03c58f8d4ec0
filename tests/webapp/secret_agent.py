"""An agent whose scripted model leaks the server's ``OPENAI_API_KEY`` the ways a hostile
model or tool could (``treadle ui tests.webapp.secret_agent:agent``), for the masking tests.

"split" answers with the key in a text streamed in small paced pieces (so it is cut between
deltas), "args" calls a tool with the key as its argument (cut between argument deltas),
"surrogate" calls a tool that sends a custom event holding a lone surrogate, "many" streams
a long answer in many deltas.
"""

from __future__ import annotations

import os

from treadle import Agent, ToolCall, tool
from treadle.loop import emit_custom_event
from treadle.providers import ModelRequest
from treadle.testing import ScriptedProvider
from treadle.testing.scripted import ScriptItem
from treadle.types import AssistantMessage, ToolResultMessage, UserMessage


@tool(category="info")
def remember(note: str) -> str:
    """Remember a note."""
    return f"noted: {note}"


@tool(category="info")
async def odd_event() -> str:
    """Send a custom event with a lone surrogate in it (a bad decode somewhere)."""
    await emit_custom_event("test.odd", {"text": "bad \udc80 byte"})
    return "sent"


def answer(request: ModelRequest) -> AssistantMessage:
    key = os.environ.get("OPENAI_API_KEY", "")
    last = request.messages[-1] if request.messages else None
    if isinstance(last, ToolResultMessage):
        return AssistantMessage(content="Done.")
    text = last.text if isinstance(last, UserMessage) else ""
    if "split" in text:
        return AssistantMessage(content=f"The key is {key}.")
    if "args" in text:
        return AssistantMessage(
            content=[ToolCall(id="call-note", name="remember", arguments={"note": key})]
        )
    if "surrogate" in text:
        return AssistantMessage(content=[ToolCall(id="call-odd", name="odd_event", arguments={})])
    if "many" in text:
        return AssistantMessage(content=" ".join(f"w{n}" for n in range(400)))
    return AssistantMessage(content=f"You said: {text}")


class LeakyModel(ScriptedProvider):
    """Answers by :func:`answer`, each text and each call's arguments in 9 paced pieces."""

    def __init__(self) -> None:
        super().__init__([], name="scripted", model="leaky", chunks=9, delay=0.02)

    @property
    def remaining(self) -> int:
        return 1

    def _next_item(self) -> ScriptItem:
        return answer


agent = Agent(LeakyModel(), tools=[remember, odd_event], name="leaky")
