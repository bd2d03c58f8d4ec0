"""Files across the UI protocols (docs/files.md#web-front-ends): a client's file parts read
as :class:`~treadle.types.FileContent` (a data URL or an http(s) URL, never a handle at the
server's provider), and the files and images a message carries written as each protocol's
parts.

A file's size is bounded by the surface's body limit (the guard's ``max_body_bytes``: a
413 that says so); a part this cannot read is a :class:`RequestError` (422) naming the
message, the part and what to send instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ConfigurationError
from ..types import FileContent, ImageContent
from ._runs import RequestError

Media = FileContent | ImageContent
GENERIC = "application/octet-stream"
"""What a browser calls a file whose type it does not know: told from the bytes instead."""

AG_UI_MEDIA = ("image", "audio", "video", "document")
"""The AG-UI content parts that carry a file (their ``source``: ``data``, ``url``, ``file``)."""

_NO_HANDLES = (
    "a client cannot name a file held at the server's provider (a file id): send the "
    "file's bytes (a data source or a data: URL) or an https URL"
)


def _read(make: Any, where: str) -> FileContent:
    try:
        block = make()
    except (ConfigurationError, ValueError) as exc:
        raise RequestError(f"{where}: {exc}", 422) from None
    if not isinstance(block, FileContent):  # pragma: no cover - constructors return one
        raise RequestError(f"{where}: not a file", 422)
    return block


def file_from_url(url: Any, media_type: Any, name: Any, where: str) -> FileContent:
    """A file part given by ``url`` (a ``data:`` URL with its bytes, or http(s)) and its
    media type, as the Vercel AI SDK's ``file`` part has it."""
    if not isinstance(url, str) or not url:
        raise RequestError(f"{where}: a file part needs its url (a data: or https URL)", 422)
    if not url.startswith(("data:", "https://", "http://")):
        scheme = url.split(":", 1)[0][:20]
        raise RequestError(
            f"{where}: a file's url must be a data: URL (its bytes) or https, not {scheme}:"
            " (a browser's blob: URL is read into a data: URL before it is sent)",
            422,
        )
    kind = media_type if isinstance(media_type, str) and media_type else None
    if kind in (None, GENERIC) and url.startswith(f"data:{GENERIC};"):
        url, kind = "data:;" + url.partition(";")[2], None  # a browser's "unknown": tell it
    label = name if isinstance(name, str) and name else None
    return _read(lambda: FileContent.from_url(url, kind, name=label), where)


def file_from_ag_ui(part: Mapping[str, Any], where: str) -> FileContent:
    """An AG-UI media part (``image``, ``audio``, ``video``, ``document``: a ``source`` of
    type ``data`` or ``url``), or the legacy ``binary`` part (``data`` or ``url``). The
    name comes from the part's ``metadata.filename`` (``binary``: its ``filename``)."""
    if part.get("type") == "binary":  # 0.x clients; AG-UI's own clients upgrade it too
        name = part.get("filename")
        if part.get("id") and not (part.get("data") or part.get("url")):
            raise RequestError(f"{where}: {_NO_HANDLES}", 422)
        if part.get("data"):
            url = f"data:{part.get('mimeType', '')};base64,{part['data']}"
            return file_from_url(url, part.get("mimeType"), name, where)
        return file_from_url(part.get("url"), part.get("mimeType"), name, where)
    source = part.get("source")
    if not isinstance(source, Mapping):
        raise RequestError(
            f"{where}: a {part.get('type')} part needs a source: "
            "{type: 'data', value, mimeType} or {type: 'url', value}",
            422,
        )
    metadata = part.get("metadata")
    name = metadata.get("filename") if isinstance(metadata, Mapping) else None
    kind, value, media_type = source.get("type"), source.get("value"), source.get("mimeType")
    if kind == "data":
        if not isinstance(media_type, str) or not media_type:
            raise RequestError(f"{where}: a data source needs its mimeType", 422)
        if not isinstance(value, str):
            raise RequestError(f"{where}: a data source's value is the base64 bytes", 422)
        return file_from_url(f"data:{media_type};base64,{value}", media_type, name, where)
    if kind == "url":
        return file_from_url(value, media_type, name, where)
    if kind == "file":
        raise RequestError(f"{where}: {_NO_HANDLES}", 422)
    raise RequestError(f"{where}: a source's type is 'data' or 'url', not {kind!r}", 422)


# ---- out ----


def media_of(blocks: Iterable[Any]) -> list[Media]:
    """The files and images among a message's blocks, in order."""
    return [b for b in blocks if isinstance(b, (FileContent, ImageContent))]


def url_of(block: Media) -> str | None:
    """Where a client reads the file: a data URL of its bytes, or its URL; None for a
    handle at the provider (a file id), which no client can read."""
    if isinstance(block, ImageContent):
        return f"data:{block.mime_type};base64,{block.data}"
    if block.data is not None:
        return block.data_url()
    return block.url


def name_of(block: Media) -> str | None:
    return block.name if isinstance(block, FileContent) else None


def ag_ui_part(block: Media) -> dict[str, Any]:
    """One AG-UI content part for a file or an image (``image``, ``audio``, ``video`` or
    ``document`` by its media type; its name in ``metadata.filename``)."""
    mime = block.mime_type
    top = mime.split("/", 1)[0]
    kind = top if top in ("image", "audio", "video") else "document"
    source: dict[str, Any]
    if isinstance(block, ImageContent):
        source = {"type": "data", "value": block.data, "mimeType": mime}
    elif block.data is not None:
        source = {"type": "data", "value": block.data, "mimeType": mime}
    elif block.url is not None:
        source = {"type": "url", "value": block.url, "mimeType": mime}
    else:
        source = {"type": "file", "value": block.file_id, "mimeType": mime}
    part: dict[str, Any] = {"type": kind, "source": source}
    name = name_of(block)
    if name:
        part["metadata"] = {"filename": name}
    return part


def ag_ui_content(text: str, blocks: Iterable[Any]) -> str | list[dict[str, Any]]:
    """A message's content for AG-UI: its text alone, or (with files) a text part and a
    part per file."""
    media = media_of(blocks)
    if not media:
        return text
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    return [*parts, *(ag_ui_part(b) for b in media)]


def ui_file_part(block: Media) -> dict[str, Any] | None:
    """A Vercel AI SDK ``file`` part (``url``, ``mediaType``; the name, where there is one,
    as ``filename`` and in ``providerMetadata.treadle``); None for a provider's file id."""
    url = url_of(block)
    if url is None:
        return None
    part: dict[str, Any] = {"type": "file", "mediaType": block.mime_type, "url": url}
    name = name_of(block)
    if name:
        part["filename"] = name
    return part


def ui_file_chunk(block: Media) -> dict[str, Any] | None:
    """The UI message stream's ``file`` chunk for a block (its name, which the chunk has no
    field for, in ``providerMetadata.treadle.filename``)."""
    part = ui_file_part(block)
    if part is None:
        return None
    chunk: dict[str, Any] = {"type": "file", "url": part["url"], "mediaType": part["mediaType"]}
    if "filename" in part:
        chunk["providerMetadata"] = {"treadle": {"filename": part["filename"]}}
    return chunk


def ag_ui_files(content: Any, where: str) -> list[FileContent]:
    """The files among an AG-UI message's content parts (none for a plain-text content)."""
    if not isinstance(content, list):
        return []
    return [
        file_from_ag_ui(part, f"{where}, part {n}")
        for n, part in enumerate(content)
        if isinstance(part, Mapping) and part.get("type") in (*AG_UI_MEDIA, "binary")
    ]
