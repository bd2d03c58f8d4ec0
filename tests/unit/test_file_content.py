"""FileContent: its sources, media types told from bytes and names, and bad input refused."""

from __future__ import annotations

import base64
import struct
from pathlib import Path

import pytest
from pydantic import ValidationError

from treadle.errors import ConfigurationError
from treadle.tools.results import to_tool_result
from treadle.types import FileContent, ImageContent, UserMessage, message_from_json
from treadle.types.media import audio_seconds, pdf_pages, sniff, wav_seconds


def pdf(pages: int) -> bytes:
    objects = b"".join(
        b"%d 0 obj <</Type /Page /Parent 1 0 R>> endobj\n" % (n + 2) for n in range(pages)
    )
    return (
        b"%PDF-1.7\n1 0 obj <</Type /Pages /Count " + str(pages).encode() + b">> endobj\n" + objects
    )


def wav(seconds: float, rate: int = 8000) -> bytes:
    frames = int(seconds * rate)
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    data = b"\x00\x00" * frames
    body = (
        b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"data"
        + struct.pack("<I", len(data))
        + data
    )
    return b"RIFF" + struct.pack("<I", len(body)) + body


SIGNATURES = {
    "application/pdf": pdf(1),
    "audio/wav": wav(0.01),
    "audio/mpeg": b"ID3\x04\x00" + b"\x00" * 20,
    "audio/ogg": b"OggS\x00\x02" + b"\x00" * 20,
    "audio/flac": b"fLaC\x00\x00\x00\x22" + b"\x00" * 20,
    "image/png": b"\x89PNG\r\n\x1a\n" + b"\x00" * 8,
    "video/mp4": b"\x00\x00\x00\x18ftypisom" + b"\x00" * 8,
}


@pytest.mark.parametrize(("mime_type", "data"), SIGNATURES.items())
def test_the_type_is_told_from_the_bytes(mime_type: str, data: bytes) -> None:
    assert sniff(data) == mime_type
    assert FileContent.from_bytes(data).mime_type == mime_type


def test_mp3_frames_without_a_tag_are_mp3() -> None:
    assert sniff(b"\xff\xfb\x90\x64" + b"\x00" * 20) == "audio/mpeg"


def test_the_name_tells_a_type_the_bytes_do_not(tmp_path: Path) -> None:
    (tmp_path / "sales.csv").write_text("region,total\nnorth,3\n")
    block = FileContent.from_path(tmp_path / "sales.csv")
    assert (block.mime_type, block.name, block.kind) == ("text/csv", "sales.csv", "text")
    assert block.text() == "region,total\nnorth,3\n"
    assert FileContent.from_bytes(b"# Title\n", name="notes.md").mime_type == "text/markdown"
    assert FileContent.from_bytes(b"plain words").mime_type == "text/plain"


def test_a_given_type_wins_and_is_normalised() -> None:
    block = FileContent.from_bytes(wav(0.01), "audio/x-wav; codecs=1")
    assert block.mime_type == "audio/wav"


def test_sources_url_file_id_and_data_urls() -> None:
    by_url = FileContent.from_url("https://example.com/report.pdf?x=1")
    assert (by_url.source, by_url.mime_type, by_url.url) == ("url", "application/pdf", by_url.url)
    by_id = FileContent.from_file_id("file-abc", "application/pdf", name="r.pdf")
    assert (by_id.source, by_id.file_id, by_id.size) == ("file_id", "file-abc", None)
    encoded = base64.b64encode(pdf(2)).decode()
    inline = FileContent.from_url(f"data:application/pdf;base64,{encoded}")
    assert inline.source == "data" and inline.raw() == pdf(2) and inline.size == len(pdf(2))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: FileContent.from_bytes(b""), "empty"),
        (lambda: FileContent.from_bytes(b"\x00\x01\x02\x03"), "pass mime_type="),
        (lambda: FileContent.from_bytes(b"x", "pdf"), "look like 'application/pdf'"),
        (lambda: FileContent.from_bytes("text"), "takes bytes"),  # type: ignore[arg-type]
        (lambda: FileContent.from_url("ftp://host/a.pdf"), "https://"),
        (lambda: FileContent.from_url("https://host/download"), "pass mime_type="),
        (lambda: FileContent.from_file_id("", "application/pdf"), "must not be empty"),
        (lambda: FileContent.from_path("/no/such/file.pdf"), "no file at"),
    ],
)
def test_bad_input_gets_a_clear_error(make: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        make()  # type: ignore[operator]


def test_exactly_one_source() -> None:
    with pytest.raises(
        ValidationError, match="exactly one of data, url or file_id, not data and url"
    ):
        FileContent(data="JVBERg==", url="https://x/a.pdf", mime_type="application/pdf")
    with pytest.raises(ValidationError, match="needs one of data, url or file_id"):
        FileContent(mime_type="application/pdf")
    with pytest.raises(ValidationError, match="empty"):
        FileContent(data="", mime_type="application/pdf")


def test_user_message_of_takes_files_and_paths_and_keeps_images(tmp_path: Path) -> None:
    path = tmp_path / "a.pdf"
    path.write_bytes(pdf(3))
    image = ImageContent.from_bytes(SIGNATURES["image/png"], "image/png")
    message = UserMessage.of("Sum up", image, files=[path, FileContent.from_url("https://x/b.pdf")])
    kinds = [block.type for block in message.content]
    assert kinds == ["text", "image", "file", "file"]
    assert message_from_json(message.model_dump_json()) == message  # stored and read back


def test_tools_may_return_files() -> None:
    block = FileContent.from_bytes(pdf(1), name="made.pdf")
    assert to_tool_result(block).content == [block]
    assert to_tool_result([block, block]).content == [block, block]


def test_figures_read_from_the_bytes() -> None:
    assert pdf_pages(pdf(7)) == 7
    compressed = b"%PDF-1.7\n1 0 obj <</Type /Pages /Kids [] /Count 12>> endobj"
    assert pdf_pages(compressed) == 12
    assert pdf_pages(b"%PDF-1.7 nothing") is None
    assert wav_seconds(wav(1.5)) == pytest.approx(1.5)
    assert audio_seconds(b"\x00" * 16_000, "audio/mpeg") == pytest.approx(1.0)
    block = FileContent.from_bytes(wav(2.0))
    assert block.seconds() == pytest.approx(2.0) and block.pages() is None


def test_a_list_of_text_and_files_is_the_content_not_json() -> None:
    block = FileContent.from_bytes(pdf(1), name="made.pdf")
    result = to_tool_result(["The report:", block])
    assert [b.type for b in result.content] == ["text", "file"]
    assert result.content[0].text == "The report:"  # type: ignore[union-attr]
    assert to_tool_result(["a", "b"]).content[0].text == '["a", "b"]'  # type: ignore[union-attr]


def test_new_bytes_are_read_again() -> None:
    block = FileContent.from_bytes(pdf(2))
    assert block.pages() == 2
    block.data = FileContent.from_bytes(pdf(5)).data
    assert block.pages() == 5
