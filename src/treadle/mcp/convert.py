"""MCP results and sampling messages, in treadle's terms (and back)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from typing import Any

from ..types import ImageContent, TextContent, ToolResult


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret replaced: a hostile server may echo a key back."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, "[REDACTED]")
    return text


def tool_result(result: Any, secrets: Iterable[str] = ()) -> ToolResult:
    """An MCP ``CallToolResult`` as a :class:`ToolResult`.

    Text, images and embedded resources become content blocks (a text resource as its text
    under a ``[resource uri]`` line, an image blob as an image, other blobs as a note);
    audio and resource links become notes; ``structured_content`` goes to ``details`` (and
    is the text when the server sent no text); ``is_error`` makes an error result the model
    sees."""
    secrets = [s for s in secrets if s]
    blocks: list[TextContent | ImageContent] = []
    for item in result.content or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            blocks.append(TextContent(text=scrub(item.text, secrets)))
        elif kind == "image":
            blocks.append(ImageContent(data=item.data, mime_type=item.mime_type))
        elif kind == "resource":
            blocks.extend(_resource(item.resource, secrets))
        elif kind == "resource_link":
            blocks.append(TextContent(text=f"[resource link {item.uri}: {item.name}]"))
        elif kind == "audio":
            blocks.append(TextContent(text=f"[audio ({item.mime_type}) not shown]"))
        else:
            blocks.append(TextContent(text=scrub(str(item), secrets)))
    structured = getattr(result, "structured_content", None)
    if structured is not None and not any(isinstance(b, TextContent) for b in blocks):
        blocks.append(TextContent(text=scrub(json.dumps(structured, default=str), secrets)))
    details = {"structured_content": structured} if structured is not None else None
    return ToolResult(content=blocks, is_error=bool(result.is_error), details=details)


def _resource(resource: Any, secrets: list[str]) -> list[TextContent | ImageContent]:
    uri = str(resource.uri)
    text = getattr(resource, "text", None)
    if text is not None:
        return [TextContent(text=f"[resource {uri}]\n{scrub(text, secrets)}")]
    mime = resource.mime_type or "application/octet-stream"
    if mime.startswith("image/"):
        return [ImageContent(data=resource.blob, mime_type=mime)]
    size = len(base64.b64decode(resource.blob or ""))
    return [TextContent(text=f"[resource {uri}: {size} bytes of {mime}]")]


def with_defaults(answer: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """An accepted elicitation's answer with the schema's ``default`` filled in for every
    field the answer left out (SEP-1034); fields it gave are kept as given."""
    filled = dict(answer)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for field, spec in properties.items():
            if field not in filled and isinstance(spec, dict) and "default" in spec:
                filled[field] = spec["default"]
    return filled
