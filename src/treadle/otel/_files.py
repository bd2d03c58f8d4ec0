"""What a span records of files and images (docs/otel.md#files): always their count, media
types and sizes; with content capture on, a reference to each (its hash and size, or its
URL or the provider's file id) in the recorded messages, never its bytes."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from typing import Any

from ..types import FileContent, ImageContent

Media = FileContent | ImageContent


def media_in(blocks: Iterable[Any]) -> list[Media]:
    return [b for b in blocks if isinstance(b, (FileContent, ImageContent))]


def size_of(block: Media) -> int | None:
    """Bytes of an inline file or image (from its base64 length), None by URL or id."""
    if isinstance(block, FileContent):
        return block.size
    padding = len(block.data) - len(block.data.rstrip("="))
    return len(block.data) * 3 // 4 - padding


def file_attributes(blocks: Iterable[Any]) -> dict[str, Any]:
    """``treadle.files.*`` for the files and images among ``blocks`` (none: no attributes):
    ``count``, ``media_types`` and ``sizes`` (one per file, in order; -1 for a file sent by
    URL or file id, whose bytes are never seen) and ``bytes`` (the inline ones' total)."""
    media = media_in(blocks)
    if not media:
        return {}
    sizes = [size_of(b) for b in media]
    return {
        "treadle.files.count": len(media),
        "treadle.files.media_types": [b.mime_type for b in media],
        "treadle.files.sizes": [-1 if s is None else s for s in sizes],
        "treadle.files.bytes": sum(s for s in sizes if s is not None),
    }


def _modality(mime_type: str) -> str:
    top = mime_type.split("/", 1)[0]
    return top if top in ("image", "audio", "video") else "document"


def file_part(block: Media) -> dict[str, Any]:
    """A recorded message's part for a file: by URL a ``uri`` part, by the provider's id a
    ``file`` part (the GenAI conventions' shapes); inline a ``file_ref``: its name, size and
    the SHA-256 of its bytes, so a record can be matched to the file without holding it."""
    part: dict[str, Any] = {"modality": _modality(block.mime_type), "mime_type": block.mime_type}
    if isinstance(block, FileContent) and block.url is not None:
        return {"type": "uri", **part, "uri": block.url}
    if isinstance(block, FileContent) and block.file_id is not None:
        return {"type": "file", **part, "file_id": block.file_id}
    raw = block.raw() if isinstance(block, FileContent) else base64.b64decode(block.data)
    name = block.name if isinstance(block, FileContent) else None
    reference = {"size": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    return {"type": "file_ref", **part, **({"name": name} if name else {}), **reference}
