"""Files in the context: the tokens they take, and the notes compaction leaves when it drops
one (docs/files.md#tokens-and-compaction)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from ..types import AgentMessage, FileContent, ImageContent, ToolResultMessage, UserMessage

PDF_PAGE_TOKENS = 2000
"""Tokens per PDF page: Anthropic counts 1,500 to 3,000 per page (its text plus the page as
an image); OpenAI and Gemini read a page as text and an image too. The middle is used."""
PDF_BYTES_PER_PAGE = 100_000
"""Pages assumed per byte when a PDF's page count cannot be read (compressed page trees)."""
AUDIO_TOKENS_PER_SECOND = 32
"""Gemini's documented rate for audio (OpenAI's audio models take about 10 a second)."""
VIDEO_TOKENS_PER_SECOND = 263
"""Gemini's documented rate for video at its default resolution (frames and sound)."""
VIDEO_BITS_PER_SECOND = 2_000_000
"""A video's duration is its size at this bit rate (no container is parsed)."""
UNSEEN_FILE_TOKENS = 2000
"""A file sent by URL or file id, whose bytes treadle never sees: one PDF page's worth."""
IMAGE_FILE_TOKENS = 1000
"""An image file: as :data:`treadle.context.tokens.IMAGE_TOKENS`."""


def file_tokens(block: FileContent) -> int:
    """The tokens a file takes besides any text it holds (a text file's text is counted as
    text). Estimates, on the side of more: budgets and compaction count them."""
    if block.kind == "text" and block.data is not None:
        return 0
    if block.kind == "image":
        return IMAGE_FILE_TOKENS
    size = block.size
    if size is None:
        return UNSEEN_FILE_TOKENS
    if block.kind == "pdf":
        pages = block.pages() or math.ceil(size / PDF_BYTES_PER_PAGE)
        return pages * PDF_PAGE_TOKENS
    if block.kind == "audio":
        return math.ceil((block.seconds() or 0.0) * AUDIO_TOKENS_PER_SECOND)
    if block.kind == "video":
        return math.ceil(size * 8 / VIDEO_BITS_PER_SECOND * VIDEO_TOKENS_PER_SECOND)
    return math.ceil(size / 4)  # another binary file: as if its bytes were text


def describe(block: FileContent) -> str:
    """``contract.pdf (application/pdf, 12 pages)``: how notes name a file."""
    facts = [block.mime_type]
    pages, seconds = block.pages(), block.seconds()
    if pages:
        facts.append(f"{pages} pages")
    if seconds:
        facts.append(f"{seconds:.0f} s")
    name = block.name or block.url or block.file_id or "unnamed"
    return f"{name} ({', '.join(facts)})"


def files_of(messages: Iterable[AgentMessage]) -> list[FileContent]:
    return [
        block
        for message in messages
        if isinstance(message, (UserMessage, ToolResultMessage))
        for block in message.content
        if isinstance(block, FileContent)
    ]


def attachments(message: UserMessage | ToolResultMessage) -> str:
    """`` [2 image(s)] [attached: report.pdf (application/pdf, 3 pages)]``: what a summariser
    is told of a message's images and files (a tool's as much as a prompt's)."""
    images = sum(isinstance(b, ImageContent) for b in message.content)
    note = f" [{images} image(s)]" if images else ""
    files = files_of([message])
    if files:
        note += f" [attached: {'; '.join(map(describe, files))}]"
    return note


_ASK = "Ask the user to attach a file again if it is needed."
_NOTE = re.compile(r"\[\d+ file\(s\) removed to save context: (.*?)\. " + re.escape(_ASK) + r"\]")


def dropped_note(messages: Iterable[AgentMessage]) -> str:
    """The line compaction adds where it removed files, naming each ("" when none): a file
    is never summarised or cut away without the model being told which. Files named by an
    earlier note among ``messages`` (a summary summarised again) are named again."""
    messages = list(messages)
    names = [describe(block) for block in files_of(messages)]
    for message in messages:
        for found in _NOTE.finditer(getattr(message, "text", "") or ""):
            names.extend(n for n in found.group(1).split("; ") if n not in names)
    if not names:
        return ""
    return f"\n[{len(names)} file(s) removed to save context: {'; '.join(names)}. {_ASK}]"
