"""Files in the context: their token estimates, and compaction naming every file it drops."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from tests.context.test_compaction import Summariser, long_history

from treadle.context import CompactionPolicy, compact, estimate_tokens
from treadle.context.compaction import SUMMARY_PREFIX, Summarize, TruncateOldest, render_transcript
from treadle.context.files import (
    AUDIO_TOKENS_PER_SECOND,
    PDF_PAGE_TOKENS,
    UNSEEN_FILE_TOKENS,
    file_tokens,
)
from treadle.types import (
    AgentMessage,
    AssistantMessage,
    FileContent,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)


def pdf(pages: int) -> FileContent:
    body = b"".join(b"%d 0 obj <</Type /Page>> endobj\n" % n for n in range(pages))
    return FileContent.from_bytes(b"%PDF-1.7\n" + body, name=f"report-{pages}.pdf")


def wav(seconds: int, rate: int = 8000) -> FileContent:
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    data = b"\0\0" * rate * seconds
    body = (
        b"WAVE"
        + b"fmt "
        + struct.pack("<I", 16)
        + fmt
        + b"data"
        + struct.pack("<I", len(data))
        + data
    )
    return FileContent.from_bytes(b"RIFF" + struct.pack("<I", len(body)) + body, name="call.wav")


def tokens(*messages: AgentMessage) -> int:
    return estimate_tokens(list(messages), encoding=None)


def test_a_pdf_costs_its_pages_and_audio_its_seconds() -> None:
    assert file_tokens(pdf(3)) == 3 * PDF_PAGE_TOKENS
    assert file_tokens(wav(10)) == 10 * AUDIO_TOKENS_PER_SECOND
    assert file_tokens(FileContent.from_url("https://x/a.pdf")) == UNSEEN_FILE_TOKENS
    bare = tokens(UserMessage.of("Read"))
    assert tokens(UserMessage.of("Read", files=[pdf(5)])) == bare + 5 * PDF_PAGE_TOKENS


def test_a_text_file_costs_its_text() -> None:
    short = FileContent.from_bytes(b"a,b\n", name="s.csv")
    long = FileContent.from_bytes(b"a,b\n" * 1000, name="l.csv")
    assert (
        tokens(UserMessage.of("x", files=[long])) - tokens(UserMessage.of("x", files=[short]))
        >= 900
    )


def test_the_summariser_is_told_which_files_there_were() -> None:
    lines = render_transcript([UserMessage.of("Sum up", files=[pdf(2)])])
    assert lines == ["User: Sum up [attached: report-2.pdf (application/pdf, 2 pages)]"]


def policy(**changes: Any) -> CompactionPolicy:
    return CompactionPolicy(**{"context_window": 4000, "tokenizer": None, **changes})


@pytest.mark.anyio
async def test_a_summary_names_the_files_it_replaced() -> None:
    history = long_history()
    history.insert(3, UserMessage.of("And this one", files=[pdf(1)]))
    result = await compact(
        history, policy=policy(strategies=[Summarize()]), provider=Summariser(), reason="threshold"
    )
    summary = next(m for m in result.messages if m.text.startswith(SUMMARY_PREFIX))  # type: ignore[union-attr]
    assert (
        "1 file(s) removed to save context: report-1.pdf (application/pdf, 1 pages)" in summary.text
    )  # type: ignore[union-attr]
    assert not any(
        isinstance(b, FileContent) for m in result.messages for b in getattr(m, "content", [])
    )


@pytest.mark.anyio
async def test_truncation_names_the_files_it_cut() -> None:
    history = long_history()
    history.insert(3, UserMessage.of("And this one", files=[wav(3)]))
    result = await compact(history, policy=policy(strategies=[TruncateOldest()]), reason="x")
    notes = [m.text for m in result.messages if isinstance(m, UserMessage) and "removed" in m.text]
    assert any("call.wav (audio/wav, 3 s)" in note for note in notes)


@pytest.mark.anyio
async def test_a_trimmed_tool_result_names_its_files() -> None:
    call = ToolCall(id="c1", name="fetch")
    history: list[AgentMessage] = [
        UserMessage.of("go"),
        AssistantMessage(content=[call], stop_reason="tool_use"),
        ToolResultMessage(
            tool_call_id="c1", tool_name="fetch", content=[TextContent(text="x" * 40_000), pdf(1)]
        ),
        AssistantMessage(content="ok"),
        UserMessage.of("next"),
    ]
    result = await compact(history, policy=policy(), reason="threshold")
    trimmed = result.messages[2]
    assert isinstance(trimmed, ToolResultMessage)
    assert "report-1.pdf (application/pdf, 1 pages)" in trimmed.text
