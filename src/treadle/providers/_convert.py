"""Helpers adapters share when turning a treadle history into a provider's wire format."""

from __future__ import annotations

import base64
import hashlib
import re

from ..types import AssistantMessage, ImageContent, ThinkingContent

_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def safe_tool_call_id(call_id: str, *, max_len: int = 64) -> str:
    """A tool-call id that providers with strict id rules accept (``[A-Za-z0-9_-]``, bounded).

    Deterministic, so a call and its result map to the same id. Ids that already fit are
    returned unchanged.
    """
    if len(call_id) <= max_len and not _ID_CHARS.search(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode()).hexdigest()[:12]
    cleaned = _ID_CHARS.sub("_", call_id)[: max_len - 13]
    return f"{cleaned}_{digest}"


def same_origin(message: AssistantMessage, provider: str, model: str | None = None) -> bool:
    """True when ``message`` was produced by this provider (and model, when given).

    Thinking signatures are only valid for their origin; elsewhere they are dropped.
    """
    if message.provider != provider:
        return False
    return model is None or not message.model or message.model == model


def thinking_as_text(block: ThinkingContent) -> str | None:
    """Foreign thinking rendered as plain text, or None when there is nothing to show."""
    if block.redacted or not block.thinking.strip():
        return None
    return f"<thinking>\n{block.thinking}\n</thinking>"


def image_data_url(image: ImageContent) -> str:
    return f"data:{image.mime_type};base64,{image.data}"


def image_bytes(image: ImageContent) -> bytes:
    return base64.b64decode(image.data)
