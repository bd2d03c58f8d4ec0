"""Files on the command line: ``treadle run --file report.pdf "summarise"`` and ``/attach``
in ``treadle chat``. Each file is read and checked against what the model takes before
anything is sent (docs/cli.md#files)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..providers.files import FileSupport, check_files
from ..types import FileContent, UserMessage


def read_files(paths: Sequence[str]) -> list[FileContent]:
    """Each path as a file; a :class:`~treadle.errors.ConfigurationError` (a ``ValueError``)
    naming the path for one that is missing, a directory, empty, or of no type it can tell."""
    return [FileContent.from_path(path) for path in paths]


def check_for(provider: Any, files: Sequence[FileContent]) -> None:
    """Raise :class:`~treadle.providers.UnsupportedFile` when ``provider`` (an adapter with a
    ``file_support`` table) cannot take one of ``files`` in a user message; a provider
    without a table (the offline model, your own) is left to say so itself."""
    support = getattr(provider, "file_support", None)
    if files and isinstance(support, FileSupport):
        message = UserMessage.of("", files=files)
        check_files(support, [message], str(provider.name), str(provider.model))


def size_text(size: int | None) -> str:
    if size is None:
        return "by reference"
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} kB"
    return f"{size / 1024 / 1024:.1f} MB"


def describe(block: FileContent) -> str:
    """``report.pdf (application/pdf, 12.3 kB)``."""
    return f"{block.name or block.label} ({block.mime_type}, {size_text(block.size)})"


def prompt_with(text: str, files: Sequence[FileContent]) -> str | UserMessage:
    """The prompt a run gets: the text alone, or a user message with the files."""
    return UserMessage.of(text, files=files) if files else text
