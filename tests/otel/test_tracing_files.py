"""Files on spans, with the OpenTelemetry SDK's in-memory exporter: the chat span records
the count, media types and sizes of the files a request carries and the tool span those of
a tool's result — never their bytes; with content capture on, the recorded messages hold
a reference to each file (its hash and size, its URL, its file id), not its base64."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel test extra is not installed")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import treadle.otel
from treadle import Agent, AssistantMessage, ToolCall, UserMessage, tool
from treadle.testing import ScriptedProvider
from treadle.types import FileContent, ImageContent

pytestmark = pytest.mark.anyio

PDF = b"%PDF-1.7\n1 0 obj <</Type /Page>> endobj\n" + b"x" * 5000
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mPQqnr0HwAE3gKGkp+jug"
    "AAAABJRU5ErkJggg=="
)


@tool
def chart(week: str) -> list[object]:
    """A chart of the week, as an image."""
    return [f"Sales for {week}:", ImageContent.from_bytes(PNG, "image/png")]


async def traced(capture: bool) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    hook = treadle.otel.instrument(tracer_provider=provider, capture_content=capture)
    model = ScriptedProvider(
        [
            AssistantMessage(content=[ToolCall(id="c1", name="chart", arguments={"week": "w1"})]),
            "Here it is.",
        ]
    )
    agent = Agent(model, tools=[chart], hooks=[hook])
    pdf = FileContent.from_bytes(PDF, name="report.pdf")
    remote = FileContent.from_url("https://example.com/notes.txt")
    await agent.run(UserMessage.of("chart it", files=[pdf, remote]))
    return list(exporter.get_finished_spans())


def attributes(spans: list[ReadableSpan], prefix: str) -> list[dict[str, Any]]:
    return [dict(s.attributes or {}) for s in spans if s.name.startswith(prefix)]


async def test_spans_record_files_counts_types_and_sizes_never_their_bytes() -> None:
    spans = await traced(capture=False)
    first, second = attributes(spans, "chat")
    assert first["treadle.files.count"] == 2
    assert first["treadle.files.media_types"] == ("application/pdf", "text/plain")
    assert first["treadle.files.sizes"] == (len(PDF), -1)  # -1: by URL, the bytes unseen
    assert first["treadle.files.bytes"] == len(PDF)
    # the second request carries the history: the prompt's files and the tool's image
    assert second["treadle.files.media_types"] == ("application/pdf", "text/plain", "image/png")
    assert second["treadle.files.bytes"] == len(PDF) + len(PNG)
    (tool_span,) = attributes(spans, "execute_tool")
    assert tool_span["treadle.files.count"] == 1
    assert tool_span["treadle.files.media_types"] == ("image/png",)
    assert tool_span["treadle.files.sizes"] == (len(PNG),)
    everything = json.dumps([dict(s.attributes or {}) for s in spans], default=str)
    assert base64.b64encode(PDF).decode()[:40] not in everything
    assert "gen_ai.input.messages" not in everything  # no content without capture


async def test_captured_messages_hold_a_reference_to_each_file_not_its_base64() -> None:
    spans = await traced(capture=True)
    first, second = attributes(spans, "chat")
    (user,) = json.loads(first["gen_ai.input.messages"])
    assert user["parts"] == [
        {"type": "text", "content": "chart it"},
        {
            "type": "file_ref",
            "modality": "document",
            "mime_type": "application/pdf",
            "name": "report.pdf",
            "size": len(PDF),
            "sha256": hashlib.sha256(PDF).hexdigest(),
        },
        {
            "type": "uri",
            "modality": "document",
            "mime_type": "text/plain",
            "uri": "https://example.com/notes.txt",
        },
    ]
    tool_message = json.loads(second["gen_ai.input.messages"])[-1]
    assert tool_message["role"] == "tool"
    assert tool_message["parts"][1] == {
        "type": "file_ref",
        "modality": "image",
        "mime_type": "image/png",
        "size": len(PNG),
        "sha256": hashlib.sha256(PNG).hexdigest(),
    }
    everything = json.dumps([dict(s.attributes or {}) for s in spans], default=str)
    assert base64.b64encode(PDF).decode()[:40] not in everything
    assert base64.b64encode(PNG).decode()[:40] not in everything


async def test_a_provider_file_id_is_recorded_as_a_file_part() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    hook = treadle.otel.instrument(tracer_provider=provider, capture_content=True)
    agent = Agent(ScriptedProvider(["ok"]), hooks=[hook])
    uploaded = FileContent.from_file_id("file-abc123", "application/pdf")
    await agent.run(UserMessage.of("read", files=[uploaded]))
    (chat,) = attributes(list(exporter.get_finished_spans()), "chat")
    assert chat["treadle.files.sizes"] == (-1,) and chat["treadle.files.bytes"] == 0
    (user,) = json.loads(chat["gen_ai.input.messages"])
    assert user["parts"][1] == {
        "type": "file",
        "modality": "document",
        "mime_type": "application/pdf",
        "file_id": "file-abc123",
    }
