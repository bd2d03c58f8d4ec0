"""The agent the web-app tests serve (``treadle ui tests.webapp.scripted_agent:agent``): a
scripted model answering by keyword, so every part of the page shows.

"weather" calls a tool, "delete" a tool that asks for approval, "parallel" two slow tools
at once, "biglog" a tool returning 5,000 lines, "markdown" answers with a table and a code
block, "think" thinks first, "hostile" answers with HTML and script, "chart" calls a tool
returning an image, "sources" answers citing two web pages, a document and a
``javascript:`` address (never a link); a message with files is answered with
their names, types and sizes (what the model got); anything else gets a long answer
streamed in small paced pieces (``WEB_TEST_DELAY`` seconds apart), long enough to stop or
reload mid-answer.
``WEB_TEST_STORE``: a SQLite file for the sessions.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import anyio

from treadle import Agent, Ask, Hooks, RunHandle, ToolCall, tool
from treadle.loop import RetryPolicy
from treadle.providers import ModelRequest, ProviderError, StreamEvent
from treadle.testing import ScriptedProvider
from treadle.testing.scripted import ScriptItem
from treadle.types import (
    AssistantMessage,
    Citation,
    FileContent,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
    UserMessage,
)

LONG = " ".join(f"word{n}" for n in range(120)) + "."
HOSTILE = (
    'Look: <img src=x onerror="window.pwned=1"> and <script>window.pwned=2</script> '
    "and **bold** and `<b>code</b>` and [link](javascript:window.pwned=3)."
)


@tool(category="info")
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny and 21 °C in {city}."


@tool
def delete_file(path: str) -> str:
    """Delete a file (asks the user first)."""
    return f"Deleted {path}."


@tool(category="info")
async def slow_lookup(topic: str) -> str:
    """Look a topic up (slowly)."""
    await anyio.sleep(0.6)
    return f"{topic}: found"


CHART_PNG = bytes.fromhex(  # 1x1, blue
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d4944415478da63d0aa7af41f0004de0286929fa3ba"
    "0000000049454e44ae426082"
)


@tool(category="info")
def chart(week: str) -> list[object]:
    """A chart of a week's sales, as an image."""
    return [f"Sales for {week} week:", FileContent.from_bytes(CHART_PNG, name="sales.png")]


@tool(category="info")
def read_log(lines: int) -> str:
    """Read the server's log (long)."""
    return "\n".join(f"log line {n}: all quiet" for n in range(1, lines + 1))


SOURCES = [
    Citation(kind="url_citation", url="https://news.example.org/first-flush", title="Early flush"),
    Citation(kind="char_location", title="Tea notes", document_index=0),
    Citation(kind="web", url="https://tea.example.com/harvest"),
    Citation(kind="url_citation", url="javascript:window.pwned=4", title="Click me"),
]
MARKDOWN = (
    "| tool | calls | share |\n| :--- | ---: | :-: |\n| weather | 12 | 60% |\n"
    "| read\\|log | 8 | `40%` |\n\n"
    "```python\nprint('<b>hi</b>')\n```"
)


helper = Agent(
    ScriptedProvider(["Helper says hi."] * 50, name="scripted", model="helper"),
    name="helper",
)


class ApproveDeletes(Hooks):
    async def before_tool_call(self, run: RunHandle, call: ToolCall) -> Ask | None:
        return Ask("Delete this file?") if call.name == "delete_file" else None


def answer(request: ModelRequest) -> AssistantMessage:
    last = request.messages[-1] if request.messages else None
    if isinstance(last, ToolResultMessage) and last.tool_name == "read_log":
        return AssistantMessage(content="Done: read the log.")
    if isinstance(last, ToolResultMessage):
        results = [m.text for m in request.messages if isinstance(m, ToolResultMessage)][-2:]
        return AssistantMessage(content="Done: " + " / ".join(results))
    text = last.text if isinstance(last, UserMessage) else ""
    low = text.lower()
    blocks = last.content if isinstance(last, UserMessage) else []
    files = [b for b in blocks if isinstance(b, FileContent)]
    if files:
        seen = ", ".join(f"{f.name} ({f.mime_type}, {f.size} bytes)" for f in files)
        return AssistantMessage(content=f"You attached {seen}.")
    if "sources" in low:
        return AssistantMessage(
            content=[TextContent(text="Green tea is not oxidised.", citations=SOURCES)]
        )
    if "chart" in low:
        return AssistantMessage(
            content=[ToolCall(id="call-chart", name="chart", arguments={"week": "this"})]
        )
    if "weather" in low:
        return AssistantMessage(
            content=[ToolCall(id="call-weather", name="weather", arguments={"city": "Porto"})]
        )
    if "delete" in low:
        return AssistantMessage(
            content=[
                ToolCall(id="call-delete", name="delete_file", arguments={"path": "notes.txt"})
            ]
        )
    if "biglog" in low:
        return AssistantMessage(
            content=[ToolCall(id="call-log", name="read_log", arguments={"lines": 5000})]
        )
    if "markdown" in low:
        return AssistantMessage(content=MARKDOWN)
    if "parallel" in low:
        return AssistantMessage(
            content=[
                ToolCall(id="call-a", name="slow_lookup", arguments={"topic": "alpha"}),
                ToolCall(id="call-b", name="slow_lookup", arguments={"topic": "beta"}),
            ]
        )
    if "delegate" in low:
        return AssistantMessage(
            content=[ToolCall(id="call-helper", name="helper", arguments={"task": "say hi"})]
        )
    if "hostile" in low:
        return AssistantMessage(content=HOSTILE)
    if "think" in low:
        return AssistantMessage(
            content=[
                ThinkingContent(thinking="Let me think it over."),
                TextContent(text="Thought."),
            ]
        )
    if "envkey" in low:  # a model (or a tool) that leaks the server's environment
        return AssistantMessage(content=f"The key is {os.environ.get('OPENAI_API_KEY')}.")
    if "short" in low:
        return AssistantMessage(content=f"Short answer to: {text}")
    return AssistantMessage(content=f"You said: {text}. {LONG}")


class WebTestModel(ScriptedProvider):
    """Answers by :func:`answer`; a message saying "flaky" is refused once (a 429) first."""

    def __init__(self, delay: float) -> None:
        super().__init__([], name="scripted", model="web-test", chunks=60, delay=delay)
        self.refused: set[str] = set()

    async def stream(
        self, request: ModelRequest, *, cancel: Any = None
    ) -> AsyncIterator[StreamEvent]:
        last = request.messages[-1] if request.messages else None
        if isinstance(last, UserMessage) and "flaky" in last.text and last.text not in self.refused:
            self.refused.add(last.text)
            raise ProviderError("rate_limit", "slow down (scripted)", status_code=429)
        async for event in super().stream(request, cancel=cancel):
            yield event

    @property
    def remaining(self) -> int:
        return 1

    def _next_item(self) -> ScriptItem:
        return answer


def make_agent() -> Agent[None]:
    store = None
    if os.environ.get("WEB_TEST_STORE"):
        from treadle.sessions import SqliteStore

        store = SqliteStore(os.environ["WEB_TEST_STORE"])
    return Agent(
        WebTestModel(float(os.environ.get("WEB_TEST_DELAY", "0.04"))),
        tools=[
            weather,
            delete_file,
            slow_lookup,
            read_log,
            chart,
            helper.as_tool(description="A helper agent."),
        ],
        hooks=[ApproveDeletes()],
        retry=RetryPolicy(initial_delay_s=0.2, jitter=0),
        name="web-test",
        store=store,
    )


agent = make_agent()
