"""Which files each adapter's API takes, checked before a request is sent (docs/files.md).

Each adapter has a :class:`FileSupport` (its ``file_support`` attribute, replaceable per
instance for a proxy or a server that takes more). A :class:`~treadle.types.FileContent`
that no rule of it accepts — its type, its source, its place (a user message or a tool
result), its model, its size or its pages — fails the request with
:class:`UnsupportedFile` before any byte is sent, naming the provider, the model, the
file and what the provider takes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from ..types import AgentMessage, FileContent, TextContent, ToolResultMessage, UserMessage
from .base import ProviderError

Place = Literal["user", "tool_result"]
MB = 1024 * 1024


@dataclass(frozen=True)
class FileRule:
    """Files of ``types`` (``"application/pdf"``, ``"audio/*"``) that an API takes from
    ``sources`` in ``places``, for models whose name contains one of ``models`` (any model
    when empty), up to ``max_bytes`` and ``max_pages`` (a PDF's)."""

    types: tuple[str, ...]
    sources: tuple[str, ...] = ("data",)
    places: tuple[Place, ...] = ("user", "tool_result")
    models: tuple[str, ...] = ()
    max_bytes: int | None = None
    max_pages: int | None = None

    def matches_type(self, mime_type: str) -> bool:
        return any(
            mime_type == t or (t.endswith("/*") and mime_type.startswith(t[:-1]))
            for t in self.types
        )

    def serves(self, model: str) -> bool:
        lowered = model.lower()
        return not self.models or any(name in lowered for name in self.models)

    def describe(self) -> str:
        limits = [f"from {'/'.join(self.sources)}"]
        if self.places != ("user", "tool_result"):
            limits.append(f"in {' and '.join(p.replace('_', ' ') + 's' for p in self.places)}")
        if self.models:
            limits.append(f"models named *{'*, *'.join(self.models)}*")
        if self.max_bytes:
            limits.append(f"up to {self.max_bytes / MB:g} MB")
        if self.max_pages:
            limits.append(f"{self.max_pages} pages")
        return f"{', '.join(self.types)} ({'; '.join(limits)})"


@dataclass(frozen=True)
class FileSupport:
    """The files one adapter's API takes: a file passes when one rule accepts it."""

    rules: tuple[FileRule, ...] = ()

    def accepted(self, model: str) -> str:
        rules = [rule.describe() for rule in self.rules if rule.serves(model)]
        return "; ".join(rules) if rules else "no files"

    def problem(self, block: FileContent, model: str, place: Place) -> str | None:
        """Why ``block`` cannot go in a ``place`` to ``model``, or None when it can."""
        typed = [r for r in self.rules if r.matches_type(block.mime_type) and r.serves(model)]
        if not typed:
            return "its type is not one it takes"
        placed = [r for r in typed if place in r.places]
        if not placed:
            return f"it takes no {block.kind} file in a {place.replace('_', ' ')}"
        sourced = [r for r in placed if block.source in r.sources]
        if not sourced:
            return f"it takes no {block.kind} file by {block.source}"
        rule = sourced[0]
        size = block.size
        if rule.max_bytes is not None and size is not None and size > rule.max_bytes:
            return f"it is {size / MB:.1f} MB, over the limit of {rule.max_bytes / MB:g} MB"
        if rule.max_pages is not None and block.kind == "pdf" and block.data is not None:
            pages = block.pages()
            if pages is not None and pages > rule.max_pages:
                return f"it has {pages} pages, over the limit of {rule.max_pages}"
        return None


class UnsupportedFile(ProviderError):
    """A file the provider (or its model) does not take: raised before the request, never
    retried (``kind="bad_request"``)."""

    def __init__(self, message: str, *, provider: str | None = None) -> None:
        super().__init__("bad_request", message, provider=provider)


def check_files(
    support: FileSupport, messages: Iterable[AgentMessage], provider: str, model: str
) -> None:
    """Raise :class:`UnsupportedFile` for the first file of ``messages`` ``support`` refuses."""
    for block, place in files_in(messages):
        problem = support.problem(block, model, place)
        if problem is not None:
            where = "a user message" if place == "user" else "a tool result"
            raise UnsupportedFile(
                f"{provider} ({model}) cannot take the {block.label} in {where}: {problem}. "
                f"It takes: {support.accepted(model)}. See docs/files.md.",
                provider=provider,
            )


def files_in(messages: Iterable[AgentMessage]) -> Iterator[tuple[FileContent, Place]]:
    for message in messages:
        if isinstance(message, (UserMessage, ToolResultMessage)):
            place: Place = "user" if isinstance(message, UserMessage) else "tool_result"
            for block in message.content:
                if isinstance(block, FileContent):
                    yield block, place


def text_of(block: object) -> str | None:
    """The text a block adds to a text-only message: a text block's, an inline text file's
    (:func:`file_as_text`); None for anything else."""
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, FileContent) and block.kind == "text" and block.data is not None:
        return file_as_text(block)
    return None


def file_as_text(block: FileContent) -> str:
    """A text file as the text an API without a text-document block reads."""
    name = f' name="{block.name}"' if block.name else ""
    return f'<file{name} type="{block.mime_type}">\n{block.text()}\n</file>'


TEXT = FileRule(("text/*", "application/json", "application/xml"))
"""Text files, sent as text (inline only)."""

# Figures: OpenAI's "File inputs" guide (PDF, up to 50 MB per file) and "Audio" guide
# (input_audio: wav and mp3, audio models only).
OPENAI_CHAT = FileSupport(
    (
        FileRule(("application/pdf",), ("data", "file_id"), max_bytes=50 * MB),
        FileRule(("image/*",), ("data", "url")),
        FileRule(("audio/wav", "audio/mpeg"), models=("audio",)),
        TEXT,
    )
)
OPENAI_RESPONSES = FileSupport(
    (
        FileRule(("application/pdf",), ("data", "url", "file_id"), max_bytes=50 * MB),
        FileRule(("image/*",), ("data", "url", "file_id")),
        TEXT,
    )
)
# Anthropic's "PDF support" page: 32 MB per request and 100 pages; plain text documents.
ANTHROPIC = FileSupport(
    (
        FileRule(
            ("application/pdf",), ("data", "url", "file_id"), max_bytes=32 * MB, max_pages=100
        ),
        FileRule(("image/*",), ("data", "url", "file_id")),
        TEXT,
    )
)
# Gemini's "Document understanding" page: inline data up to 20 MB per request (larger files
# through the Files API), PDFs up to 1000 pages; audio, video and images inline or by URI.
GEMINI = FileSupport(
    (
        FileRule(
            ("application/pdf",), ("data", "url", "file_id"), max_bytes=20 * MB, max_pages=1000
        ),
        FileRule(("audio/*", "video/*", "image/*"), ("data", "url", "file_id"), max_bytes=20 * MB),
        TEXT,
        FileRule(("text/*",), ("url", "file_id")),
    )
)
# Ollama's /api/chat takes base64 images only (for vision models).
OLLAMA = FileSupport((FileRule(("image/*",)), TEXT))

# Bedrock's Converse API (its DocumentBlock, ImageBlock and VideoBlock): documents of these
# formats up to 4.5 MB each, images up to 3.75 MB; video for Amazon Nova models.
DOCUMENT_FORMATS = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
}
BEDROCK = FileSupport(
    (
        FileRule(tuple(DOCUMENT_FORMATS), max_bytes=4 * MB + MB // 2),
        FileRule(
            ("image/png", "image/jpeg", "image/gif", "image/webp"), max_bytes=3 * MB + 3 * MB // 4
        ),
        FileRule(
            ("video/mp4", "video/webm", "video/quicktime"), models=("nova",), max_bytes=25 * MB
        ),
        TEXT,
    )
)
