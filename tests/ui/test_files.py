"""Files through the UI protocols, over HTTP against the UI example (examples/ui/app.py):
a user's file parts reach the model as FileContent (AG-UI media parts and the legacy
``binary`` part; the AI SDK's ``file`` parts, by data URL or https URL), a tool's image
comes back as the protocol's own part (checked against the ``ag-ui-protocol`` models and
the AI SDK's chunk shape), bad parts get a 422 that says what to send, and a body over
the limit a 413 that says files count toward it."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.servers import served

from treadle import Agent, AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from treadle.testing import ScriptedProvider
from treadle.types import FileContent, ImageContent, TextContent
from treadle.ui.ag_ui import messages_from_ag_ui, messages_to_ag_ui
from treadle.ui.vercel_ai import messages_from_ui, vercel_ai_app
from treadle.ui.web._history import messages_to_ui

from .conftest import sse_frames

ag_ui_core = pytest.importorskip(
    "ag_ui.core", reason="install the ag-ui extra: pip install -e '.[ag-ui]'"
)
uvicorn = pytest.importorskip("uvicorn")
EVENT = __import__("pydantic").TypeAdapter(ag_ui_core.Event)
MESSAGE = __import__("pydantic").TypeAdapter(ag_ui_core.Message)

PDF = b"%PDF-1.7\n1 0 obj <</Type /Page>> endobj\n"
PDF64 = base64.b64encode(PDF).decode()
PNG64 = (  # examples/ui/app.py's chart
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mPQqnr0HwAE3gKGkp+jug"
    "AAAABJRU5ErkJggg=="
)


# ---- AG-UI ----


def agui(url: str, content: Any) -> tuple[int, list[dict[str, Any]], str]:
    thread = uuid.uuid4().hex
    body = {
        "threadId": thread,
        "runId": f"{thread}-run",
        "messages": [{"id": "u1", "role": "user", "content": content}],
    }
    with httpx.stream("POST", url + "/agui", json=body, timeout=30) as response:
        if response.status_code != 200:
            return response.status_code, [], response.read().decode()
        events = [json.loads(d) for _, d in sse_frames(response)]
    for event in events:
        assert not EVENT.validate_python(event).model_extra, event  # AG-UI's own models
    return 200, events, ""


def answer_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def test_ag_ui_media_parts_reach_the_model_as_files(ui_server: str) -> None:
    status, events, _ = agui(
        ui_server,
        [
            {"type": "text", "text": "read these"},
            {
                "type": "document",
                "source": {"type": "data", "value": PDF64, "mimeType": "application/pdf"},
                "metadata": {"filename": "report.pdf"},
            },
            {"type": "image", "source": {"type": "url", "value": "https://example.com/a.png"}},
        ],
    )
    assert status == 200
    assert answer_of(events).startswith(
        f"You attached report.pdf (application/pdf, {len(PDF)} bytes), "
        "None (image/png, None bytes)."  # by URL: the provider fetches it, no bytes here
    )


def test_ag_ui_legacy_binary_part_is_read_too(ui_server: str) -> None:
    binary = {"type": "binary", "mimeType": "text/csv", "data": "YSxiCjEsMgo=", "filename": "t.csv"}
    status, events, _ = agui(ui_server, [{"type": "text", "text": "sum"}, binary])
    assert status == 200 and answer_of(events).startswith("You attached t.csv (text/csv, 8 bytes).")


def test_ag_ui_a_tools_image_is_an_image_part_of_the_result(ui_server: str) -> None:
    status, events, _ = agui(ui_server, "draw a chart")
    assert status == 200
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert result["content"] == [
        {"type": "text", "text": "Sales for this week:"},
        {
            "type": "image",
            "source": {"type": "data", "value": PNG64, "mimeType": "image/png"},
            "metadata": {"filename": "sales.png"},
        },
    ]


@pytest.mark.parametrize(
    ("part", "words"),
    [
        (
            {"type": "document", "source": {"type": "file", "value": "file-abc"}},
            "cannot name a file held at the server's provider",
        ),
        (
            {"type": "document", "source": {"type": "data", "value": PDF64}},
            "a data source needs its mimeType",
        ),
        (
            {"type": "image", "source": {"type": "data", "value": "%%%", "mimeType": "image/png"}},
            "not valid base64",
        ),
        ({"type": "audio", "source": {"type": "url", "value": "ftp://x/a.wav"}}, "must be a data"),
        ({"type": "video"}, "needs a source"),
    ],
)
def test_ag_ui_a_bad_file_part_is_a_422_saying_what_to_send(
    ui_server: str, part: dict[str, Any], words: str
) -> None:
    status, _, text = agui(ui_server, [{"type": "text", "text": "x"}, part])
    assert status == 422
    error = json.loads(text)["error"]
    assert "message 'u1', part 1" in error and words in error


def test_ag_ui_history_with_files_converts_both_ways_as_valid_messages() -> None:
    pdf = FileContent.from_bytes(PDF, name="report.pdf")
    image = ImageContent(data=PNG64, mime_type="image/png")
    history = [
        UserMessage.of("read it", files=[pdf]),
        AssistantMessage(content=[ToolCall(id="c1", name="chart", arguments={})]),
        ToolResultMessage(
            tool_call_id="c1", tool_name="chart", content=[TextContent(text="done"), image]
        ),
    ]
    wire = messages_to_ag_ui(history)
    for message in wire:
        MESSAGE.validate_python(message)
    assert wire[0]["content"][1]["source"]["value"] == pdf.data
    back, _ = messages_from_ag_ui(wire)
    user, result = back[0], back[2]
    assert isinstance(user, UserMessage) and isinstance(result, ToolResultMessage)
    (got,) = [b for b in user.content if isinstance(b, FileContent)]
    assert (got.name, got.mime_type, got.raw()) == ("report.pdf", "application/pdf", PDF)
    (made,) = [b for b in result.content if isinstance(b, FileContent)]
    assert made.mime_type == "image/png" and made.data == PNG64


# ---- the Vercel AI SDK ----


def chat(url: str, parts: list[dict[str, Any]], path: str = "/api/chat") -> httpx.Response:
    message = {"id": "u1", "role": "user", "parts": parts}
    request = {"id": uuid.uuid4().hex, "messages": [message], "trigger": "submit-message"}
    return httpx.post(url + path, json=request, timeout=30)


def chunks(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    frames = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert frames[-1] == "[DONE]"
    return [json.loads(f) for f in frames[:-1]]


def text_of(out: list[dict[str, Any]]) -> str:
    return "".join(c["delta"] for c in out if c["type"] == "text-delta")


def test_vercel_file_parts_reach_the_model_as_files(ui_server: str) -> None:
    out = chunks(
        chat(
            ui_server,
            [
                {"type": "text", "text": "read these"},
                {
                    "type": "file",
                    "mediaType": "application/pdf",
                    "filename": "report.pdf",
                    "url": f"data:application/pdf;base64,{PDF64}",
                },
                {"type": "file", "mediaType": "text/csv", "url": "https://example.com/t.csv"},
            ],
        )
    )
    assert text_of(out).startswith(
        f"You attached report.pdf (application/pdf, {len(PDF)} bytes), None (text/csv, None bytes)."
    )


def test_vercel_a_tools_image_is_a_file_chunk_after_its_output(ui_server: str) -> None:
    out = chunks(chat(ui_server, [{"type": "text", "text": "draw a chart"}]))
    kinds = [c["type"] for c in out]
    at = kinds.index("tool-output-available")
    assert out[at]["output"] == "Sales for this week:"
    # the AI SDK's file chunk: {type, url, mediaType, providerMetadata?} and nothing else
    assert out[at + 1] == {
        "type": "file",
        "url": f"data:image/png;base64,{PNG64}",
        "mediaType": "image/png",
        "providerMetadata": {"treadle": {"filename": "sales.png"}},
    }


@pytest.mark.parametrize(
    ("part", "words"),
    [
        ({"type": "file", "mediaType": "image/png", "url": "blob:http://x/1"}, "not blob:"),
        ({"type": "file", "mediaType": "application/pdf"}, "needs its url"),
        ({"type": "file", "url": "data:;base64,AAEC"}, "cannot tell the media type"),
        ({"type": "file", "mediaType": "text/plain", "url": "data:text/plain,hi"}, "base64"),
    ],
)
def test_vercel_a_bad_file_part_is_a_422_saying_what_to_send(
    ui_server: str, part: dict[str, Any], words: str
) -> None:
    response = chat(ui_server, [{"type": "text", "text": "x"}, part])
    assert response.status_code == 422
    error = response.json()["error"]
    assert "message 'u1', part 1" in error and words in error


def test_vercel_a_tools_file_in_the_history_goes_back_with_its_result() -> None:
    """A client keeping the history sends the tool's file part back after the tool's part;
    the model sees it in that tool's result again."""
    history, _ = messages_from_ui(
        [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "chart"}]},
            {
                "id": "a1",
                "role": "assistant",
                "parts": [
                    {"type": "step-start"},
                    {
                        "type": "tool-chart",
                        "toolCallId": "c1",
                        "state": "output-available",
                        "input": {},
                        "output": "Sales:",
                    },
                    {
                        "type": "file",
                        "mediaType": "image/png",
                        "url": f"data:image/png;base64,{PNG64}",
                    },
                    {"type": "step-start"},
                    {"type": "text", "text": "Here it is."},
                ],
            },
        ]
    )
    result = history[2]
    assert isinstance(result, ToolResultMessage) and result.text == "Sales:"
    (image,) = [b for b in result.content if isinstance(b, FileContent)]
    assert image.data == PNG64
    assert isinstance(history[3], AssistantMessage) and history[3].text == "Here it is."


def test_the_web_history_shows_files_where_the_stream_put_them() -> None:
    pdf = FileContent.from_bytes(PDF, name="report.pdf")
    image = FileContent.from_bytes(base64.b64decode(PNG64), name="sales.png")
    ui = messages_to_ui(
        [
            UserMessage.of("read it", files=[pdf]),
            AssistantMessage(content=[ToolCall(id="c1", name="chart", arguments={})]),
            ToolResultMessage(
                tool_call_id="c1", tool_name="chart", content=[TextContent(text="ok"), image]
            ),
        ]
    )
    assert ui[0]["parts"][1] == {
        "type": "file",
        "mediaType": "application/pdf",
        "url": f"data:application/pdf;base64,{PDF64}",
        "filename": "report.pdf",
    }
    kinds = [p["type"] for p in ui[1]["parts"]]
    assert kinds == ["step-start", "tool-chart", "file"]
    assert ui[1]["parts"][2]["filename"] == "sales.png"


def test_the_inspectors_request_view_leaves_files_bytes_out() -> None:
    """A file sent on every turn is not copied into every turn's request event."""
    from treadle.providers import ModelRequest
    from treadle.ui.web._requests import request_view

    pdf = FileContent.from_bytes(PDF, name="report.pdf")
    view = request_view(ModelRequest(messages=[UserMessage.of("read", files=[pdf])]))
    block = view["messages"][0]["content"][1]
    assert block["data"] is None and block["size"] == len(PDF)
    assert (block["name"], block["mime_type"]) == ("report.pdf", "application/pdf")
    assert pdf.data is not None  # the request itself keeps its file


# ---- the body limit ----


@pytest.fixture(scope="module")
def small_server() -> Iterator[str]:
    """The Vercel AI app with a 20 kB body limit, on 127.0.0.1."""
    agent = Agent(ScriptedProvider(["ok"] * 5))
    with served(vercel_ai_app(agent, max_body_bytes=20_000)) as url:
        yield url


def test_a_file_over_the_body_limit_is_a_413_that_says_so(small_server: str) -> None:
    big = base64.b64encode(b"%PDF-1.7\n" + bytes(30_000)).decode()
    part = {
        "type": "file",
        "mediaType": "application/pdf",
        "url": f"data:application/pdf;base64,{big}",
    }
    response = chat(small_server, [{"type": "text", "text": "read"}, part])
    assert response.status_code == 413
    assert "larger than 20000 bytes" in response.text
    assert "files attached to a message travel in it" in response.text
    small = base64.b64encode(PDF).decode()
    part["url"] = f"data:application/pdf;base64,{small}"
    assert chunks(chat(small_server, [{"type": "text", "text": "read"}, part]))  # under it: served
