"""One agent served to web front ends in their own protocols: AG-UI (``@ag-ui/client``,
CopilotKit) at ``POST /agui`` and the Vercel AI SDK's ``useChat`` at ``POST /api/chat``.
Both resume a dropped stream (``Last-Event-ID``) with no gap and no duplicate.

    pip install 'treadle[web]'
    python examples/ui/app.py 8000        # then open http://127.0.0.1:8000 (a chat page on the
                                          # Vercel AI stream), or point a front end at it

The offline model (no TREADLE_MODEL) answers by rule so every protocol feature shows:
"weather" calls a server tool ("forecast" says a sentence first), "delete" a tool that
needs the user's approval, "todo" a tool that changes the shared state, "colour" the
client's own ``pick_colour`` tool, "chart" a tool that returns an image (a file part on
both protocols), "sources" an answer citing two web pages and a document (``source-url``
parts on the AI SDK stream; AG-UI has no event for a source); a message with files
attached is answered with their names, types and sizes (what the model was given);
anything else gets a paced, longer answer (so a dropped connection lands mid-answer).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from treadle import (
    Agent,
    Ask,
    AssistantMessage,
    Hooks,
    RunHandle,
    TextContent,
    ToolCall,
    tool,
)
from treadle.providers import ModelRequest
from treadle.testing import ScriptedProvider
from treadle.tools import ExternalTool, ToolContext
from treadle.types import Citation, FileContent, ToolResultMessage, UserMessage
from treadle.ui.ag_ui import ag_ui_app
from treadle.ui.vercel_ai import vercel_ai_app

PAGE = (Path(__file__).with_name("page.html")).read_text(encoding="utf-8")
LONG = "Here is a longer answer, streamed in small pieces so you can watch it arrive. " * 4


@tool(category="info")
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny and 21 °C in {city}."


@tool
def delete_file(path: str) -> str:
    """Delete a file (asks the user first)."""
    return f"Deleted {path}."


@tool
def add_todo(item: str, ctx: ToolContext[Any]) -> str:
    """Add an item to the shared to-do list."""
    state = ctx.context.state
    state["todos"] = [*state.get("todos", []), item]
    return f"Added {item!r}; {len(state['todos'])} on the list."


# A 1x1 PNG: what a charting tool would render.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d4944415478da63d0aa7af41f0004de0286929fa3ba"
    "0000000049454e44ae426082"
)


@tool(category="info")
def chart(week: str) -> list[object]:
    """A chart of a week's sales, as an image."""
    return [f"Sales for {week} week:", FileContent.from_bytes(PNG, name="sales.png")]


def pick_colour(options: list[str]) -> str:
    """Ask the user to pick one of some colours (the browser answers).

    Args:
        options: the colours to offer.
    """
    raise NotImplementedError


class ApproveDeletes(Hooks):
    async def before_tool_call(self, run: RunHandle, call: ToolCall) -> Ask | None:
        return Ask("Delete this file?") if call.name == "delete_file" else None


def answer(request: ModelRequest) -> AssistantMessage:
    """The offline model: a rule per keyword of the last user message."""
    last = request.messages[-1] if request.messages else None
    if isinstance(last, ToolResultMessage):
        return AssistantMessage(content=f"Done: {last.text} {LONG[:120]}")
    text = last.text.lower() if isinstance(last, UserMessage) else ""
    calls = {
        "weather": ("weather", {"city": "Porto"}),
        "delete": ("delete_file", {"path": "notes.txt"}),
        "todo": ("add_todo", {"item": "buy milk"}),
        "colour": ("pick_colour", {"options": ["red", "blue"]}),
        "chart": ("chart", {"week": "this"}),
    }
    if "sources" in text:  # an answer with the sources it cites
        return AssistantMessage(content=[TextContent(text=CITED, citations=SOURCES)])
    if "forecast" in text:  # a sentence and a tool call in one assistant message
        call = ToolCall(id="call-weather", name="weather", arguments={"city": "Porto"})
        return AssistantMessage(content=[TextContent(text="Let me look that up."), call])
    for word, (name, args) in calls.items():
        if word in text:
            return AssistantMessage(
                content=[ToolCall(id=f"call-{name}", name=name, arguments=args)]
            )
    files = [b for b in last.content if isinstance(b, FileContent)] if last else []
    if files:  # what the model was given: each file's name, type and size
        seen = ", ".join(f"{f.name} ({f.mime_type}, {f.size} bytes)" for f in files)
        return AssistantMessage(content=f"You attached {seen}. {LONG[:80]}")
    return AssistantMessage(content=f"You said: {last.text if last else ''}. {LONG}")


CITED = "Green tea is not oxidised, and the 2026 harvest came early."
SOURCES = [
    Citation(kind="char_location", title="Tea notes", cited_text="Green tea is made from "
             "unoxidised leaves.", document_index=0, source_start=0, source_end=41),
    Citation(kind="url_citation", url="https://news.example.org/first-flush-2026",
             title="An early first flush", start=31, end=60),
    Citation(kind="url_citation", url="https://tea.example.com/harvest", start=31, end=60),
]  # fmt: skip


class OfflineModel:
    """A provider answering by rule (see :func:`answer`), streamed like a real one."""

    name = "offline"
    model = "offline-rules"

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def stream(self, request: ModelRequest, *, cancel: Any = None) -> AsyncIterator[Any]:
        one = ScriptedProvider(
            [answer], chunks=24, delay=self.delay, name=self.name, model=self.model
        )
        async for event in one.stream(request, cancel=cancel):
            yield event


def make_agent() -> Agent[None]:
    spec = os.environ.get("TREADLE_MODEL")
    if spec:
        model: Any = spec
    else:
        print("(offline: a rule-based model answers; set TREADLE_MODEL to use a real one)")
        model = OfflineModel(float(os.environ.get("UI_EXAMPLE_DELAY", "0.01")))
    return Agent(
        model,
        tools=[weather, delete_file, add_todo, chart],
        hooks=[ApproveDeletes()],
        system_prompt="You are a helpful assistant.",
    )


def create_app() -> Starlette:
    agent = make_agent()
    agui = ag_ui_app(agent, path="/agui")
    # useChat has no way to declare tools: the ones its page runs are declared here.
    chat_agent = agent.branch(0)
    chat_agent.context.tools = [*chat_agent.context.tools, ExternalTool.from_function(pick_colour)]
    chat = vercel_ai_app(chat_agent, path="/api/chat")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with agui.state.runs.serving(), chat.state.runs.serving():
            yield

    async def page(request: Request) -> HTMLResponse:
        return HTMLResponse(PAGE)

    return Starlette(routes=[Route("/", page), *agui.routes, *chat.routes], lifespan=lifespan)


if __name__ == "__main__":
    import uvicorn

    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
    uvicorn.run(create_app(), host="127.0.0.1", port=port, log_level="warning")
