"""Media types of files: told from a name's extension or the bytes' signature, and the
figures estimates need (a PDF's pages, an audio file's seconds). Pure functions on bytes."""

from __future__ import annotations

import mimetypes
import re
import struct

# Our own table first: the platform's (``mimetypes``) differs between systems, and a type
# must not change with the machine a history was made on.
EXTENSIONS: dict[str, str] = {
    "pdf": "application/pdf",
    "txt": "text/plain",
    "text": "text/plain",
    "md": "text/markdown",
    "markdown": "text/markdown",
    "csv": "text/csv",
    "tsv": "text/tab-separated-values",
    "html": "text/html",
    "htm": "text/html",
    "xml": "text/xml",
    "json": "application/json",
    "doc": "application/msword",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "xls": "application/vnd.ms-excel",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "wav": "audio/wav",
    "mp3": "audio/mpeg",
    "ogg": "audio/ogg",
    "oga": "audio/ogg",
    "flac": "audio/flac",
    "m4a": "audio/mp4",
    "aac": "audio/aac",
    "aiff": "audio/aiff",
    "aif": "audio/aiff",
    "webm": "video/webm",
    "mp4": "video/mp4",
    "mov": "video/quicktime",
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
}

# Other spellings of one type, read as ours so tables and checks see one name.
ALIASES: dict[str, str] = {
    "audio/x-wav": "audio/wav",
    "audio/wave": "audio/wav",
    "audio/vnd.wave": "audio/wav",
    "audio/mp3": "audio/mpeg",
    "audio/x-flac": "audio/flac",
    "audio/x-aiff": "audio/aiff",
    "audio/x-m4a": "audio/mp4",
    "image/jpg": "image/jpeg",
    "text/x-markdown": "text/markdown",
}

_TYPE = re.compile(r"^[a-z0-9][a-z0-9.+_-]*/[a-z0-9][a-z0-9.+_-]*$")

TEXT_TYPES = frozenset({"application/json", "application/xml", "application/x-yaml"})
"""Types besides ``text/*`` whose content is text."""


def normalise(mime_type: str) -> str | None:
    """``mime_type`` lower-cased, its parameters (``; charset=…``) dropped and its alias
    replaced; None when it is not of the form ``type/subtype``."""
    bare = mime_type.split(";", 1)[0].strip().lower()
    if not _TYPE.match(bare):
        return None
    return ALIASES.get(bare, bare)


def from_name(name: str) -> str | None:
    """The media type a file name's extension names, or None."""
    stem = name.rsplit("/", 1)[-1].split("?", 1)[0].split("#", 1)[0]
    if "." not in stem:
        return None
    extension = stem.rsplit(".", 1)[-1].lower()
    known = EXTENSIONS.get(extension)
    if known is not None:
        return known
    guessed, _ = mimetypes.guess_type(f"x.{extension}", strict=False)
    return normalise(guessed) if guessed else None


def sniff(data: bytes) -> str | None:
    """The media type the bytes' signature shows (PDF, WAV, MP3, OGG, FLAC, AIFF, MP4,
    WebM, PNG, JPEG, GIF, WebP), or None when it shows none."""
    head = data[:16]
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "audio/wav"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"ID3"):
        return "audio/mpeg"
    if head.startswith(b"OggS"):
        return "audio/ogg"
    if head.startswith(b"fLaC"):
        return "audio/flac"
    if head[:4] == b"FORM" and head[8:12] in (b"AIFF", b"AIFC"):
        return "audio/aiff"
    if head[4:8] == b"ftyp":
        return "audio/mp4" if head[8:11] == b"M4A" else "video/mp4"
    if head.startswith(b"\x1aE\xdf\xa3"):
        return "video/webm"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0:
        # An MPEG audio frame header: layer bits 00 are ADTS (AAC), others MP3.
        return "audio/aac" if head[1] & 0x06 == 0 else "audio/mpeg"
    return None


def looks_like_text(data: bytes) -> bool:
    """True for UTF-8 without NUL bytes (the first 8 KiB are read)."""
    sample = data[:8192]
    if b"\x00" in sample:
        return False
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:  # a character cut at the sample's end is still text
        return len(sample) == 8192 and exc.start >= len(sample) - 3
    return True


def is_text(mime_type: str) -> bool:
    return mime_type.startswith("text/") or mime_type in TEXT_TYPES


def kind_of(mime_type: str) -> str:
    """``"pdf"``, ``"text"``, ``"audio"``, ``"image"``, ``"video"`` or ``"other"``."""
    if mime_type == "application/pdf":
        return "pdf"
    if is_text(mime_type):
        return "text"
    major = mime_type.split("/", 1)[0]
    return major if major in ("audio", "image", "video") else "other"


_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z])")
_COUNT = re.compile(rb"/Type\s*/Pages\b[^>]*?/Count\s+(\d+)|/Count\s+(\d+)[^>]*?/Type\s*/Pages\b")


def pdf_pages(data: bytes) -> int | None:
    """A PDF's page count read from its objects (``/Type /Page``), else from its page tree's
    ``/Count`` (pages in compressed object streams); None when neither is readable."""
    pages = len(_PAGE.findall(data))
    if pages:
        return pages
    counts = [int(a or b) for a, b in _COUNT.findall(data)]
    return max(counts) if counts else None


# Bit rates assumed when a header gives no duration (bits per second): typical encodings.
ASSUMED_BITRATES: dict[str, int] = {
    "audio/mpeg": 128_000,
    "audio/aac": 128_000,
    "audio/mp4": 128_000,
    "audio/ogg": 96_000,
    "audio/flac": 800_000,
    "audio/aiff": 1_411_200,
    "audio/wav": 1_411_200,
}


def wav_seconds(data: bytes) -> float | None:
    """A WAV file's duration from its ``fmt `` (byte rate) and ``data`` (size) chunks."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return None
    at, byte_rate, size = 12, 0, None
    while at + 8 <= len(data):
        chunk, length = data[at : at + 4], struct.unpack("<I", data[at + 4 : at + 8])[0]
        if chunk == b"fmt " and length >= 12 and at + 20 <= len(data):
            byte_rate = struct.unpack("<I", data[at + 16 : at + 20])[0]
        elif chunk == b"data":
            size = min(length, len(data) - at - 8)  # a streamed WAV may say 0xFFFFFFFF
            break
        at += 8 + length + (length & 1)
    if not byte_rate or size is None:
        return None
    return float(size / byte_rate)


def audio_seconds(data: bytes, mime_type: str) -> float:
    """An audio file's duration: a WAV's from its header, others' from their size at a
    typical bit rate (:data:`ASSUMED_BITRATES`)."""
    if mime_type == "audio/wav":
        seconds = wav_seconds(data)
        if seconds is not None:
            return seconds
    rate = ASSUMED_BITRATES.get(mime_type, 128_000)
    return float(len(data) * 8 / rate)
