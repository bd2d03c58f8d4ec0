"""Files on each adapter's wire: the block each API documents (checked against the official
SDKs' request types), and a file the API cannot take refused before any request."""

from __future__ import annotations

import base64
import struct
import types
import typing
from typing import Any

import pytest
import typing_extensions
from pydantic import TypeAdapter

from treadle import Agent
from treadle.providers import ModelRequest
from treadle.providers.files import FileRule, FileSupport, UnsupportedFile
from treadle.testing import WireFake
from treadle.types import (
    AssistantMessage,
    FileContent,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

pytestmark = pytest.mark.anyio
# importing the anthropic SDK takes ~2.5 s of CPU: its tests share one xdist worker
# (tests/scheduling.py), which imports it once
ANTHROPIC_SDK = pytest.mark.xdist_group("anthropic-sdk")

PDF = b"%PDF-1.7\n1 0 obj <</Type /Pages /Count 1>> endobj\n2 0 obj <</Type /Page>> endobj\n"
PDF64 = base64.b64encode(PDF).decode()
PDF_FILE = FileContent.from_bytes(PDF, name="contract.pdf")
PDF_URL = FileContent.from_url("https://example.com/contract.pdf")
PDF_ID = FileContent.from_file_id("file-123", "application/pdf")
CSV = FileContent.from_bytes(b"region,total\nnorth,3\n", name="sales.csv")
CSV_TEXT = '<file name="sales.csv" type="text/csv">\nregion,total\nnorth,3\n\n</file>'
IMAGE_URL = FileContent.from_url("https://example.com/chart.png")


def wav() -> bytes:
    fmt = struct.pack("<HHIIHH", 1, 1, 8000, 16000, 2, 16)
    body = (
        b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt + b"data" + struct.pack("<I", 4) + b"\0" * 4
    )
    return b"RIFF" + struct.pack("<I", len(body)) + body


AUDIO = FileContent.from_bytes(wav(), name="call.wav")


def valid(kind: Any, value: Any) -> None:
    """``value`` is a valid ``kind`` (an SDK's TypedDict or a union of them) with no key the
    type does not name, at any depth (pydantic alone ignores unknown keys)."""
    TypeAdapter(kind).validate_python(value)
    assert known_keys(kind, value), f"{value} has keys {kind} does not name"


def known_keys(kind: Any, value: Any) -> bool:
    origin = typing.get_origin(kind)
    if origin in (
        typing.Union,
        types.UnionType,
        typing_extensions.Required,
        typing_extensions.NotRequired,
    ):
        return any(known_keys(arg, value) for arg in typing.get_args(kind))
    if typing_extensions.is_typeddict(kind):
        if not isinstance(value, dict):
            return False
        hints = typing_extensions.get_type_hints(kind)
        return set(value) <= set(hints) and all(known_keys(hints[k], v) for k, v in value.items())
    return True


async def send(fake: Any, model: str, *messages: Any) -> dict[str, Any]:
    provider = fake.provider(model, api_key="k")
    async for _ in provider.stream(ModelRequest(messages=list(messages))):
        pass
    body: dict[str, Any] = fake.requests[-1].json
    return body


async def refused(provider: Any, *messages: Any) -> UnsupportedFile:
    """The error the adapter raises for ``messages`` (adapters raise when iterated)."""
    with pytest.raises(UnsupportedFile) as caught:
        async for _ in provider.stream(ModelRequest(messages=list(messages))):
            pass
    return caught.value


def with_tool_result(*blocks: Any) -> list[Any]:
    call = ToolCall(id="call_1", name="make_report", arguments={})
    return [
        UserMessage.of("Make the report"),
        AssistantMessage(content=[call], provider="other"),
        ToolResultMessage(tool_call_id="call_1", tool_name="make_report", content=list(blocks)),
    ]


# ---- Anthropic ----


@ANTHROPIC_SDK
async def test_anthropic_documents_by_data_url_id_and_text() -> None:
    from anthropic.types import DocumentBlockParam, ImageBlockParam

    fake = WireFake.anthropic(["ok"])
    user = UserMessage.of("Read", files=[PDF_FILE, PDF_URL, PDF_ID, CSV, IMAGE_URL])
    content = (await send(fake, "claude-sonnet-4-5", user))["messages"][0]["content"]
    content[-1].pop("cache_control")
    assert content[1:] == [
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF64},
            "title": "contract.pdf",
        },
        {"type": "document", "source": {"type": "url", "url": PDF_URL.url}},
        {"type": "document", "source": {"type": "file", "file_id": "file-123"}},
        {
            "type": "document",
            "source": {
                "type": "text",
                "media_type": "text/plain",
                "data": "region,total\nnorth,3\n",
            },
            "title": "sales.csv",
        },
        {"type": "image", "source": {"type": "url", "url": IMAGE_URL.url}},
    ]
    for block in content[1:5]:
        valid(DocumentBlockParam, block)
    valid(ImageBlockParam, content[5])
    assert fake.requests[0].headers["anthropic-beta"] == "files-api-2025-04-14"  # file_id needs it


@ANTHROPIC_SDK
async def test_anthropic_tool_results_carry_documents() -> None:
    from anthropic.types import ToolResultBlockParam

    fake = WireFake.anthropic(["ok"])
    body = await send(
        fake, "claude-sonnet-4-5", *with_tool_result(TextContent(text="done"), PDF_FILE)
    )
    result = body["messages"][-1]["content"][0]
    result.pop("cache_control", None)
    result["content"][-1].pop("cache_control", None)
    assert result["content"][1]["type"] == "document"
    valid(ToolResultBlockParam, result)


async def test_anthropic_refuses_audio_before_any_request() -> None:
    fake = WireFake.anthropic(["ok"])
    provider = fake.provider("claude-sonnet-4-5", api_key="k")
    error = await refused(provider, UserMessage.of("Transcribe", files=[AUDIO]))
    message = str(error)
    assert "anthropic (claude-sonnet-4-5) cannot take the audio/wav file 'call.wav'" in message
    assert "application/pdf" in message and error.kind == "bad_request" and not error.retryable
    assert fake.requests == []


async def test_anthropic_refuses_a_pdf_over_100_pages() -> None:
    pages = b"".join(b"%d 0 obj <</Type /Page>> endobj\n" % n for n in range(101))
    big = FileContent.from_bytes(b"%PDF-1.7\n" + pages, name="long.pdf")
    fake = WireFake.anthropic(["ok"])
    provider = fake.provider("claude-sonnet-4-5", api_key="k")
    error = await refused(provider, UserMessage.of("Read", files=[big]))
    assert "101 pages, over the limit of 100" in str(error)
    assert fake.requests == []


async def test_the_loop_ends_the_turn_with_the_error_and_sends_nothing() -> None:
    fake = WireFake.anthropic(["never"])
    agent = Agent(fake.provider("claude-sonnet-4-5", api_key="k"))
    result = await agent.run(UserMessage.of("Transcribe", files=[AUDIO]))
    assert result.error is not None and result.error.kind == "bad_request"
    assert "cannot take the audio/wav file" in result.error.message
    assert fake.requests == []


# ---- OpenAI Chat ----


async def test_openai_chat_file_parts_audio_and_text() -> None:
    from openai.types.chat import ChatCompletionContentPartParam

    fake = WireFake.openai(["ok"])
    user = UserMessage.of("Read", files=[PDF_FILE, PDF_ID, CSV, IMAGE_URL, AUDIO])
    parts = (await send(fake, "gpt-4o-audio-preview", user))["messages"][0]["content"]
    assert parts[1:] == [
        {
            "type": "file",
            "file": {
                "filename": "contract.pdf",
                "file_data": f"data:application/pdf;base64,{PDF64}",
            },
        },
        {"type": "file", "file": {"file_id": "file-123"}},
        {"type": "text", "text": CSV_TEXT},
        {"type": "image_url", "image_url": {"url": IMAGE_URL.url}},
        {"type": "input_audio", "input_audio": {"data": AUDIO.data, "format": "wav"}},
    ]
    for part in parts:
        valid(ChatCompletionContentPartParam, part)


async def test_openai_chat_audio_needs_an_audio_model_and_urls_need_another_api() -> None:
    fake = WireFake.openai(["ok"])
    provider = fake.provider("gpt-4o-mini", api_key="k")
    error = await refused(provider, UserMessage.of("Hear", files=[AUDIO]))
    assert "openai (gpt-4o-mini) cannot take the audio/wav" in str(error)
    error = await refused(provider, UserMessage.of("Read", files=[PDF_URL]))
    assert "no pdf file by url" in str(error)
    assert fake.requests == []


async def test_openai_chat_tool_files_follow_in_a_user_message() -> None:
    fake = WireFake.openai(["ok"])
    body = await send(fake, "gpt-4o-mini", *with_tool_result(CSV, PDF_FILE))
    tool, follow = body["messages"][-2:]
    assert tool["role"] == "tool" and tool["content"].startswith(CSV_TEXT)
    assert "1 image(s) or file(s) follow" in tool["content"]
    assert follow["role"] == "user" and follow["content"][1]["type"] == "file"


# ---- OpenAI Responses ----


async def test_openai_responses_input_file_and_image_by_every_source() -> None:
    from openai.types.responses import ResponseInputFileParam, ResponseInputImageParam

    fake = WireFake.responses(["ok"])
    image_id = FileContent.from_file_id("file-img", "image/png")
    user = UserMessage.of("Read", files=[PDF_FILE, PDF_URL, PDF_ID, IMAGE_URL, image_id, CSV])
    parts = (await send(fake, "gpt-5", user))["input"][0]["content"]
    assert parts[1:] == [
        {
            "type": "input_file",
            "file_data": f"data:application/pdf;base64,{PDF64}",
            "filename": "contract.pdf",
        },
        {"type": "input_file", "file_url": PDF_URL.url},
        {"type": "input_file", "file_id": "file-123"},
        {"type": "input_image", "image_url": IMAGE_URL.url},
        {"type": "input_image", "file_id": "file-img"},
        {"type": "input_text", "text": CSV_TEXT},
    ]
    for part in parts[1:6]:
        if part["type"] == "input_file":
            valid(ResponseInputFileParam, part)
        else:  # the SDK's type requires "detail"; the API defaults it to "auto"
            valid(ResponseInputImageParam, part | {"detail": "auto"})


async def test_openai_responses_tool_output_carries_files() -> None:
    fake = WireFake.responses(["ok"])
    body = await send(fake, "gpt-5", *with_tool_result(TextContent(text="made"), PDF_ID))
    output = body["input"][-1]["output"]
    assert output == [
        {"type": "input_text", "text": "made"},
        {"type": "input_file", "file_id": "file-123"},
    ]


async def test_openai_responses_refuses_audio() -> None:
    fake = WireFake.responses(["ok"])
    error = await refused(
        fake.provider("gpt-5", api_key="k"), UserMessage.of("Hear", files=[AUDIO])
    )
    assert "cannot take the audio/wav" in str(error)
    assert fake.requests == []


# ---- Gemini ----


async def test_gemini_inline_data_and_file_data() -> None:
    fake = WireFake.gemini(["ok"])
    uri = FileContent.from_file_id(
        "https://generativelanguage.googleapis.com/v1beta/files/abc", "audio/mpeg"
    )
    user = UserMessage.of("Read", files=[PDF_FILE, AUDIO, uri, CSV])
    parts = (await send(fake, "gemini-2.5-flash", user))["contents"][0]["parts"]
    assert parts[1:] == [
        {"inlineData": {"mimeType": "application/pdf", "data": PDF64}},
        {"inlineData": {"mimeType": "audio/wav", "data": AUDIO.data}},
        {"fileData": {"mimeType": "audio/mpeg", "fileUri": uri.file_id}},
        {"text": CSV_TEXT},
    ]


async def test_gemini_tool_files_follow_the_function_response() -> None:
    fake = WireFake.gemini(["ok"])
    body = await send(
        fake, "gemini-2.5-flash", *with_tool_result(TextContent(text="made"), PDF_FILE)
    )
    parts = body["contents"][-1]["parts"]
    assert parts[0]["functionResponse"]["response"] == {"result": "made"}
    assert parts[-1] == {"inlineData": {"mimeType": "application/pdf", "data": PDF64}}


# ---- Ollama ----


async def test_ollama_takes_images_and_text_and_refuses_the_rest() -> None:
    fake = WireFake.ollama(["ok"])
    png = FileContent.from_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 8)
    body = await send(fake, "llava", UserMessage.of("Look", files=[png, CSV]))
    message = body["messages"][0]
    assert message["content"] == "Look\n" + CSV_TEXT and message["images"] == [png.data]
    error = await refused(fake.provider("llava"), UserMessage.of("Read", files=[PDF_FILE]))
    assert "ollama (llava) cannot take the application/pdf" in str(error)
    assert len(fake.requests) == 1


async def test_an_instance_may_widen_its_support() -> None:
    fake = WireFake.ollama(["ok"])
    provider = fake.provider("some-pdf-model")
    provider.file_support = FileSupport((FileRule(("application/pdf",)),))
    async for _ in provider.stream(
        ModelRequest(messages=[UserMessage.of("Read", files=[PDF_FILE])])
    ):
        pass
    assert len(fake.requests) == 1


# ---- Bedrock ----


async def test_bedrock_document_blocks_and_text() -> None:
    fake = WireFake.bedrock(["ok"])
    docx = FileContent.from_bytes(b"PK\x03\x04" + b"\0" * 20, name="Q3 plan (draft) v2.docx")
    json_file = FileContent.from_bytes(b'{"a": 1}', name="data.json")
    user = UserMessage.of("Read", files=[PDF_FILE, CSV, docx, json_file])
    content = (await send(fake, "anthropic.claude-sonnet-4-5", user))["messages"][0]["content"]
    assert content[-1] == {"cachePoint": {"type": "default"}}
    assert content[1:-1] == [
        {"document": {"format": "pdf", "name": "contract", "source": {"bytes": PDF64}}},
        {"document": {"format": "csv", "name": "sales", "source": {"bytes": CSV.data}}},
        {
            "document": {
                "format": "docx",
                "name": "Q3 plan (draft) v2",
                "source": {"bytes": docx.data},
            }
        },
        {"text": '<file name="data.json" type="application/json">\n{"a": 1}\n</file>'},
    ]


async def test_bedrock_takes_video_for_nova_only_and_no_audio() -> None:
    fake = WireFake.bedrock(["ok"])
    video = FileContent.from_bytes(b"\x00\x00\x00\x18ftypisom" + b"\0" * 8, name="clip.mp4")
    body = await send(fake, "amazon.nova-pro-v1:0", UserMessage.of("Watch", files=[video]))
    assert body["messages"][0]["content"][1] == {
        "video": {"format": "mp4", "source": {"bytes": video.data}}
    }
    claude = fake.provider("anthropic.claude-sonnet-4-5")
    error = await refused(claude, UserMessage.of("Watch", files=[video]))
    assert "bedrock (anthropic.claude-sonnet-4-5) cannot take the video/mp4 file 'clip.mp4'" in str(
        error
    )
    error = await refused(claude, UserMessage.of("Hear", files=[AUDIO]))
    assert "audio/wav" in str(error) and len(fake.requests) == 1
