"""Compaction in a run never drops a file silently: the summariser is told about every file
(a prompt's and a tool's), and each file gone from the history is named where it was."""

from __future__ import annotations

from typing import Any

import pytest

from treadle import Agent, AssistantMessage, ToolCall, Usage, UserMessage, tool
from treadle.context import estimate_tokens
from treadle.context.compaction import render_transcript
from treadle.providers import ModelRequest
from treadle.testing import ScriptedProvider
from treadle.types import (
    AgentMessage,
    CompactionEnd,
    FileContent,
    TextContent,
    ToolResultMessage,
)

pytestmark = pytest.mark.anyio

LONG = "word " * 300
PAGE = b"%PDF-1.7\n1 0 obj <</Type /Page>> endobj\n"


@tool
def fetch_chart() -> list[object]:
    """Today's chart, as a PDF."""
    return ["The chart:", FileContent.from_bytes(PAGE, name="chart.pdf")]


def files(messages: list[AgentMessage]) -> list[str]:
    return [
        b.name or ""
        for m in messages
        for b in getattr(m, "content", [])
        if isinstance(b, FileContent)
    ]


def said(messages: list[AgentMessage]) -> str:
    return "\n".join(getattr(m, "text", "") for m in messages)


def summary_request(provider: ScriptedProvider) -> ModelRequest:
    """The compaction's summary call: the one request that offers no tools."""
    return next(r for r in provider.requests if not r.tools)


def counted(answer: str | AssistantMessage) -> Any:
    """A scripted answer whose usage counts the request's files, as a real API's does (the
    scripted provider's own estimate reads the JSON, where a PDF page is a few bytes)."""

    def respond(request: ModelRequest) -> AssistantMessage:
        message = answer
        if isinstance(message, str):
            message = AssistantMessage(content=[TextContent(text=message)])
        used = estimate_tokens(request.messages, encoding=None)
        return message.model_copy(update={"usage": Usage(input=used, output=10)})

    return respond


async def test_a_compaction_run_names_every_file_it_removes() -> None:
    call = ToolCall(id="call_1", name="fetch_chart", arguments={})
    provider = ScriptedProvider(
        [
            counted(AssistantMessage(content=[call], stop_reason="tool_use")),
            counted(f"The report and the chart agree. {LONG}"),
            *(counted(f"answer {i} {LONG}") for i in range(6)),
            "SUMMARY of the early talk",
            *(counted(f"later {i}") for i in range(6)),
        ]
    )
    agent: Agent[Any] = Agent(provider, tools=[fetch_chart], compaction={"context_window": 5000})
    report = FileContent.from_bytes(PAGE, name="report.pdf")
    await agent.run(UserMessage.of("Compare the report with the chart", files=[report]))
    before = files(agent.messages)
    assert before == ["report.pdf", "chart.pdf"]

    compactions = 0
    for i in range(6):
        async with agent.stream(f"question {i} {LONG}") as events:
            compactions += sum([isinstance(e, CompactionEnd) async for e in events])
    assert compactions >= 1

    transcript = said(summary_request(provider).messages)
    assert "[attached: report.pdf (application/pdf, 1 pages)]" in transcript
    # the tool's file: trimmed from its result first, with a note the summariser reads
    assert "chart.pdf (application/pdf, 1 pages)" in transcript

    kept, history = files(agent.messages), said(agent.messages)
    for name in before:  # still there, or named where it went
        assert name in kept or f"{name} (application/pdf, 1 pages)" in history, name
    assert "file(s) removed to save context" in history


def test_the_summariser_is_told_of_a_tools_files() -> None:
    result = ToolResultMessage(
        tool_call_id="call_1",
        tool_name="fetch_chart",
        content=[TextContent(text="The chart:"), FileContent.from_bytes(PAGE, name="c.pdf")],
    )
    assert render_transcript([result]) == [
        "Result of fetch_chart: The chart: [attached: c.pdf (application/pdf, 1 pages)]"
    ]
