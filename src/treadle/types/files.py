"""``FileContent``: a document, an audio clip or any other file in a message (docs/files.md)."""

from __future__ import annotations

import base64
import binascii
import os
import weakref
from pathlib import Path
from typing import Any, Literal

from pydantic import PrivateAttr, field_validator, model_validator

from ..errors import ConfigurationError
from . import media
from ._watch import Watched

FileSource = Literal["data", "url", "file_id"]


class FileContent(Watched):
    """A file the model reads: a PDF, a text or CSV document, an audio clip, an image by URL.

    It holds exactly one of ``data`` (the bytes, base64-encoded), ``url`` or ``file_id`` (a
    file already uploaded to the provider), and its ``mime_type``. Make one with
    :meth:`from_path`, :meth:`from_bytes`, :meth:`from_url` or :meth:`from_file_id`, which
    tell the media type from the bytes or the name when it is not given. Each adapter sends it
    the way its API takes it, or refuses it before the request (docs/files.md).
    """

    type: Literal["file"] = "file"
    mime_type: str
    data: str | None = None
    url: str | None = None
    file_id: str | None = None
    name: str | None = None
    _facts: dict[str, Any] = PrivateAttr(default_factory=dict)  # figures read from the bytes
    _shared: _Shared | None = PrivateAttr(default=None)  # keeps ``data`` in the shared table

    @field_validator("mime_type", mode="after")
    @classmethod
    def _known_form(cls, value: str) -> str:
        normal = media.normalise(value)
        if normal is None:
            raise ValueError(f"mime_type must look like 'application/pdf', not {value!r}")
        return normal

    @model_validator(mode="after")
    def _one_source(self) -> FileContent:
        problem = _source_problem(self.data, self.url, self.file_id)
        if problem:
            raise ValueError(problem)
        if self.data is not None:  # one string for equal contents (not an edit: no setattr)
            self.__dict__["data"], self._shared = share(self.data)
        return self

    def __eq__(self, other: object) -> bool:
        """Equal fields: what is cached from the bytes (pages, the hash) and the holder of
        the shared string are not part of the value."""
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # mutable, as every model here

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name in ("data", "mime_type"):  # figures read from the old bytes no longer hold
            self._facts.clear()
        if name == "data":
            self._shared = None

    # ---- constructors ----

    @classmethod
    def from_bytes(
        cls, data: bytes, mime_type: str | None = None, *, name: str | None = None
    ) -> FileContent:
        """A file from its bytes; ``mime_type`` told from the bytes' signature, then from
        ``name``'s extension, then (UTF-8 without NUL bytes) ``text/plain`` when not given."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise ConfigurationError(
                f"FileContent.from_bytes takes bytes, not {type(data).__name__}"
                " (for a path use FileContent.from_path, for a URL FileContent.from_url)"
            )
        raw = bytes(data)
        if not raw:
            raise ConfigurationError(f"the file {name or ''} is empty: there is nothing to send")
        kind = _given(mime_type) or media.sniff(raw) or (media.from_name(name) if name else None)
        if kind is None and media.looks_like_text(raw):
            kind = "text/plain"
        if kind is None:
            what = f"of {name!r}" if name else "of these bytes"
            raise ConfigurationError(
                f"cannot tell the media type {what}: pass mime_type= (e.g. 'application/pdf')"
            )
        encoded = base64.b64encode(raw).decode("ascii")
        return cls(data=encoded, mime_type=kind, name=name)

    @classmethod
    def from_path(
        cls, path: str | os.PathLike[str], mime_type: str | None = None, *, name: str | None = None
    ) -> FileContent:
        """A file read from ``path`` (its name is the path's last part unless ``name``)."""
        file = Path(path)
        try:
            raw = file.read_bytes()
        except FileNotFoundError:
            raise ConfigurationError(f"no file at {str(file)!r}") from None
        except IsADirectoryError:
            raise ConfigurationError(f"{str(file)!r} is a directory, not a file") from None
        return cls.from_bytes(raw, mime_type, name=name or file.name)

    @classmethod
    def from_url(
        cls, url: str, mime_type: str | None = None, *, name: str | None = None
    ) -> FileContent:
        """A file the provider fetches from ``url`` (``https://``); a ``data:`` URL is read
        as its bytes. The type is told from the URL's extension when not given."""
        if url.startswith("data:"):
            head, _, payload = url.partition(",")
            if not head.endswith(";base64"):
                raise ConfigurationError("a data: URL must be base64 (data:<type>;base64,...)")
            try:
                raw = base64.b64decode(payload, validate=True)
            except (binascii.Error, ValueError):
                raise ConfigurationError("the data: URL's payload is not valid base64") from None
            return cls.from_bytes(raw, mime_type or head[5:-7] or None, name=name)
        if not url.startswith(("https://", "http://", "gs://")):
            raise ConfigurationError(
                f"a file URL must start with https:// (or be a data: URL), not {url[:40]!r}"
            )
        kind = _given(mime_type) or media.from_name(url)
        if kind is None:
            raise ConfigurationError(
                f"cannot tell the media type of {url[:80]!r} from its name: pass mime_type="
            )
        return cls(url=url, mime_type=kind, name=name)

    @classmethod
    def from_file_id(cls, file_id: str, mime_type: str, *, name: str | None = None) -> FileContent:
        """A file already uploaded to the provider (OpenAI ``file-…``, Anthropic ``file_…``,
        a Gemini file URI), of type ``mime_type`` (adapters choose the block by it)."""
        if not file_id:
            raise ConfigurationError("file_id must not be empty")
        return cls(file_id=file_id, mime_type=_given(mime_type) or mime_type, name=name)

    # ---- what adapters and estimates read ----

    @property
    def source(self) -> FileSource:
        return "data" if self.data is not None else "url" if self.url is not None else "file_id"

    @property
    def kind(self) -> str:
        """``"pdf"``, ``"text"``, ``"audio"``, ``"image"``, ``"video"`` or ``"other"``."""
        return media.kind_of(self.mime_type)

    @property
    def size(self) -> int | None:
        """The file's size in bytes (from the base64 length), None when it is not inline."""
        if self.data is None:
            return None
        padding = len(self.data) - len(self.data.rstrip("="))
        return len(self.data) * 3 // 4 - padding

    def raw(self) -> bytes:
        """The file's bytes (only for ``data``)."""
        if self.data is None:
            raise ConfigurationError(f"{self.label} is not inline: it has no bytes here")
        return base64.b64decode(self.data)

    def pages(self) -> int | None:
        """A PDF's page count read from its bytes (once), None when unknown or not inline."""
        if self.kind != "pdf" or self.data is None:
            return None
        if "pages" not in self._facts:
            self._facts["pages"] = media.pdf_pages(self.raw())
        pages: int | None = self._facts["pages"]
        return pages

    def seconds(self) -> float | None:
        """An audio file's duration (WAV header, else size at a typical bit rate), once."""
        if self.kind != "audio" or self.data is None:
            return None
        if "seconds" not in self._facts:
            self._facts["seconds"] = media.audio_seconds(self.raw(), self.mime_type)
        seconds: float = self._facts["seconds"]
        return seconds

    def text(self) -> str:
        """A text file's content, decoded as UTF-8 (invalid bytes replaced)."""
        return self.raw().decode("utf-8", errors="replace")

    @property
    def label(self) -> str:
        """How errors name the file: its name, else its type and source."""
        where = self.name or self.url or self.file_id
        return f"{self.mime_type} file {where!r}" if where else f"{self.mime_type} file"

    def data_url(self) -> str:
        return f"data:{self.mime_type};base64,{self.data}"


class _Shared:
    """Holds one file content's base64 for the blocks that have it (weakly tabled)."""

    __slots__ = ("__weakref__", "data")

    def __init__(self, data: str) -> None:
        self.data = data


_SHARED: weakref.WeakValueDictionary[str, _Shared] = weakref.WeakValueDictionary()
"""Base64 contents by value, each while a block holds it: a file read again, or loaded from
a session, on every turn is one string in memory, not one per message (docs/files.md)."""


def share(data: str) -> tuple[str, _Shared]:
    """The one string equal to ``data`` that blocks alive now share, and its holder."""
    holder = _SHARED.get(data)
    if holder is None:
        holder = _SHARED[data] = _Shared(data)
    return holder.data, holder


def _given(mime_type: str | None) -> str | None:
    if mime_type is None:
        return None
    normal = media.normalise(mime_type)
    if normal is None:
        raise ConfigurationError(f"mime_type must look like 'application/pdf', not {mime_type!r}")
    return normal


def _source_problem(data: Any, url: Any, file_id: Any) -> str | None:
    given = [name for name, value in (("data", data), ("url", url), ("file_id", file_id)) if value]
    if len(given) == 1:
        return None
    if not given:
        empty = data is not None and not data
        return (
            "the file is empty: there is nothing to send"
            if empty
            else "a FileContent needs one of data, url or file_id"
        )
    return f"a FileContent holds exactly one of data, url or file_id, not {' and '.join(given)}"
