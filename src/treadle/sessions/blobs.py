"""Files kept once, by content hash, beside a session's records (docs/sessions.md#files).

A stored message does not hold the bytes of its inline files and images: each such block
is written as a reference, ``{"type": "file", "mime_type": …, "name": …, "blob":
"sha256:<hex>", "size": <bytes>}``, and the bytes go to the store's blobs (a directory
beside the JSONL files, a table of the SQLite database, a dict of the memory store), once
per content whichever message, session or branch refers to them. Loading puts the bytes
back (one string per content, shared by every message that holds it) after checking
them against their hash. Records with the bytes inline (sessions written before) load as
they are.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any, Literal

from ..errors import ConfigurationError
from ..types import AgentMessage, FileContent, ImageContent, ToolResultMessage, UserMessage
from .base import SessionCorrupt

PREFIX = "sha256:"
MissingFiles = Literal["error", "note"]
_MARK = '"blob":"sha256:'  # how a stored payload that refers to a blob is told at a glance

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class SessionBlobError(SessionCorrupt):
    """A file of a stored session cannot be read: its blob is missing, or its bytes no
    longer match their hash (damaged). Says which session, message and file, and what to do.
    The rest of the session is intact (``load(..., missing_files="note")`` reads it)."""

    def __init__(
        self,
        message: str,
        *,
        session_id: str,
        index: int,
        digest: str,
        name: str | None,
        reason: Literal["missing", "damaged"],
    ) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.index = index
        self.digest = digest
        self.name = name
        self.reason = reason


def digest_of(raw: bytes) -> str:
    return PREFIX + hashlib.sha256(raw).hexdigest()


def hex_of(digest: str) -> str | None:
    """The hex part of ``sha256:<hex>``, or None when it is not one (never a path part
    that could leave the blob directory)."""
    if not digest.startswith(PREFIX):
        return None
    hexpart = digest[len(PREFIX) :]
    if len(hexpart) != 64 or any(c not in "0123456789abcdef" for c in hexpart):
        return None
    return hexpart


def _canonical(block: FileContent | ImageContent) -> tuple[str, bytes | None] | None:
    """``(digest, raw bytes or None when the digest was known)`` of an inline block, or None
    when its data is not canonical base64 (it is then stored inline, exactly as given)."""
    if isinstance(block, FileContent):
        known = block._facts.get("sha256")
        if known is not None:
            return known, None
    data = block.data
    if data is None:
        return None
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(raw).decode("ascii") != data:
        return None  # whitespace or odd padding: kept as written, byte for byte
    digest = digest_of(raw)
    if isinstance(block, FileContent):
        block._facts["sha256"] = digest
    return digest, raw


def _inline_blocks(message: AgentMessage) -> list[tuple[int, FileContent | ImageContent]]:
    if not isinstance(message, (UserMessage, ToolResultMessage)):
        return []
    return [
        (i, block)
        for i, block in enumerate(message.content)
        if isinstance(block, (FileContent, ImageContent)) and block.data
    ]


def encode_message(
    message: AgentMessage, stored: Callable[[str], bool]
) -> tuple[str, dict[str, bytes]]:
    """``message`` as the JSON a store keeps, and the blobs it needs that ``stored`` says
    the store does not have yet (digest -> raw bytes). The caller writes those first."""
    inline = _inline_blocks(message)
    if not inline:
        return message.model_dump_json(), {}
    payload = message.model_dump(mode="json")
    content = payload["content"]
    new: dict[str, bytes] = {}
    for i, block in inline:
        found = _canonical(block)
        if found is None:
            continue
        digest, raw = found
        if digest not in new and not stored(digest):
            if raw is None:
                raw = base64.b64decode(block.data or "")
            new[digest] = raw
        ref = {k: v for k, v in content[i].items() if k != "data"}
        size = len(raw) if raw is not None else _size(block)
        ref.update(blob=digest, size=size)
        content[i] = ref
    return _dumps(payload), new


def _size(block: FileContent | ImageContent) -> int:
    data = block.data or ""
    return len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))


def refers_to_blobs(payload: Any) -> bool:
    if isinstance(payload, (str, bytes)):
        text = payload if isinstance(payload, str) else payload.decode("utf-8", "replace")
        return _MARK in text
    if isinstance(payload, dict):
        return any(isinstance(b, dict) and "blob" in b for b in payload.get("content") or ())
    return False


def digests_in(payload: Any) -> list[str]:
    """The blobs a stored payload refers to."""
    if not refers_to_blobs(payload):
        return []
    data = json.loads(payload) if isinstance(payload, (str, bytes)) else payload
    return [
        b["blob"]
        for b in data.get("content") or ()
        if isinstance(b, dict) and isinstance(b.get("blob"), str)
    ]


class BlobResolver:
    """Puts the bytes back into stored payloads for one load: each blob read and checked
    once, its base64 shared by every message that refers to it."""

    def __init__(
        self,
        session_id: str,
        read: Callable[[str], bytes | None],
        where: str,
        missing_files: MissingFiles = "error",
    ) -> None:
        if missing_files not in ("error", "note"):
            raise ConfigurationError(
                f"missing_files must be 'error' or 'note', not {missing_files!r}"
            )
        self.session_id = session_id
        self._read = read
        self._where = where
        self._mode = missing_files
        self._cache: dict[str, tuple[str, Literal["missing", "damaged"] | None]] = {}
        self.problems: list[SessionBlobError] = []

    def resolve_all(self, payloads: Sequence[Any]) -> list[Any]:
        return [self.resolve(i, p) if refers_to_blobs(p) else p for i, p in enumerate(payloads)]

    def resolve(self, index: int, payload: Any) -> dict[str, Any]:
        data = json.loads(payload) if isinstance(payload, (str, bytes)) else dict(payload)
        content = list(data.get("content") or ())
        for i, block in enumerate(content):
            if isinstance(block, dict) and "blob" in block:
                content[i] = self._block(index, block)
        data["content"] = content
        return data

    def _data(self, digest: str) -> tuple[str, Literal["missing", "damaged"] | None]:
        """The blob's base64, or ``("", why)`` when it cannot be read."""
        if digest not in self._cache:
            raw = self._read(digest) if hex_of(digest) else None
            found: tuple[str, Literal["missing", "damaged"] | None]
            if raw is None:
                found = ("", "missing")
            elif digest_of(raw) != digest:
                found = ("", "damaged")
            else:
                found = (base64.b64encode(raw).decode("ascii"), None)
            self._cache[digest] = found
        return self._cache[digest]

    def _block(self, index: int, block: dict[str, Any]) -> dict[str, Any]:
        digest = str(block["blob"])
        data, reason = self._data(digest)
        if reason is None:
            out = {k: v for k, v in block.items() if k not in ("blob", "size")}
            out["data"] = data
            return out
        problem = self._problem(index, block, digest, reason)
        if self._mode == "error":
            raise problem
        self.problems.append(problem)
        return {"type": "text", "text": f"[{_describe(block)} could not be read: {reason}]"}

    def _problem(
        self, index: int, block: dict[str, Any], digest: str, reason: Literal["missing", "damaged"]
    ) -> SessionBlobError:
        what = _describe(block)
        sid = self.session_id
        why = (
            f"its blob {digest} is not in {self._where}"
            if reason == "missing"
            else f"its blob {digest} in {self._where} no longer matches its hash (damaged)"
        )
        return SessionBlobError(
            f"session {sid!r}, message {index}: the {what} cannot be read: {why}. The rest "
            f"of the session is intact. Put the file back with store.restore_blob(data) (its "
            f"sha256 must be {digest[len(PREFIX) :]}), or read the session with "
            f"store.load({sid!r}, missing_files='note'), which puts a note in its place "
            "(docs/sessions.md#files).",
            session_id=sid,
            index=index,
            digest=digest,
            name=block.get("name"),
            reason=reason,
        )


def _describe(block: dict[str, Any]) -> str:
    kind = "image" if block.get("type") == "image" else "file"
    name = block.get("name")
    facts = [str(block.get("mime_type", "?"))]
    if isinstance(block.get("size"), int):
        facts.append(f"{block['size']} bytes")
    return f"{kind} {name!r} ({', '.join(facts)})" if name else f"{kind} ({', '.join(facts)})"
