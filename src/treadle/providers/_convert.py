"""What every adapter shares when it turns a request into its wire format (docs/architecture.md)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from ..types.content import FileContent, ImageContent, TextContent, ThinkingContent, ToolCall
from ..types.messages import AgentMessage, AssistantMessage, ToolResultMessage, UserMessage

T = TypeVar("T")
P = TypeVar("P")

_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")

# The request's generation settings, in the order they are written into a body (the
# penalties last: not every API takes them).
SETTINGS = ("max_tokens", "temperature", "top_p", "seed", "stop")
PENALTIES = (*SETTINGS, "presence_penalty", "frequency_penalty")


def wire_names(fields: Iterable[str], **renamed: str) -> dict[str, str]:
    """A settings table for :func:`put_settings`: each field under its own name or ``renamed``."""
    return {field: renamed.get(field, field) for field in fields}


def safe_tool_call_id(call_id: str, *, max_len: int = 64) -> str:
    """A tool-call id that providers with strict id rules accept (``[A-Za-z0-9_-]``, bounded):
    an id that fits as it is, else a deterministic one, so a call and its result agree."""
    if len(call_id) <= max_len and not _ID_CHARS.search(call_id):
        return call_id
    digest = hashlib.sha256(call_id.encode()).hexdigest()[:12]
    cleaned = _ID_CHARS.sub("_", call_id)[: max_len - 13]
    return f"{cleaned}_{digest}"


def thinking_as_text(block: ThinkingContent) -> str | None:
    """Foreign thinking rendered as plain text, or None when there is nothing to show."""
    if block.redacted or not block.thinking.strip():
        return None
    return f"<thinking>\n{block.thinking}\n</thinking>"


def visible_thinking(message: AssistantMessage) -> str:
    """The message's thinking that can be read (not redacted, not empty), joined by lines."""
    return "\n".join(
        block.thinking
        for block in message.content
        if isinstance(block, ThinkingContent) and not block.redacted and block.thinking
    )


def image_data_url(image: ImageContent) -> str:
    return f"data:{image.mime_type};base64,{image.data}"


def user_parts(
    content: Iterable[TextContent | ImageContent | FileContent],
    text: Callable[[str], T],
    image: Callable[[ImageContent], T],
    file: Callable[[FileContent], T],
) -> list[T]:
    """Text, image and file blocks in a provider's shape, in order, but empty text (APIs
    reject it). Files were checked against the adapter's ``file_support`` before."""
    out: list[T] = []
    for block in content:
        if isinstance(block, TextContent):
            if block.text:
                out.append(text(block.text))
        elif isinstance(block, ImageContent):
            out.append(image(block))
        else:
            out.append(file(block))
    return out


def assistant_parts(
    message: AssistantMessage,
    provider: str,
    *,
    text: Callable[[str], T],
    thinking: Callable[[ThinkingContent], T | None],
    call: Callable[[ToolCall], T],
) -> list[T]:
    """An assistant message's blocks in a provider's shape, in order (empty text left out); its
    thinking through ``thinking`` if this provider made it, else (or for None) as text or not."""
    native = message.provider == provider
    out: list[T] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text:
                out.append(text(block.text))
        elif isinstance(block, ThinkingContent):
            part = thinking(block) if native else None
            if part is None:
                shown = thinking_as_text(block)
                part = text(shown) if shown else None
            if part is not None:
                out.append(part)
        else:
            out.append(call(block))
    return out


def each_message(
    messages: Iterable[AgentMessage],
    *,
    user: Callable[[UserMessage], T],
    assistant: Callable[[AssistantMessage], T],
    tool: Callable[[ToolResultMessage], T],
) -> Iterator[T]:
    """The history converted one message at a time (extension messages never reach one)."""
    for message in messages:
        if isinstance(message, UserMessage):
            yield user(message)
        elif isinstance(message, AssistantMessage):
            yield assistant(message)
        elif isinstance(message, ToolResultMessage):
            yield tool(message)


def after_tool_runs(
    entries: Iterable[tuple[T | None, Sequence[P], bool]], gather: Callable[[list[P]], T]
) -> list[T]:
    """Entries ``(converted or None, parts left behind, is a tool result)`` in order, the
    parts (images) a run of tool results leaves following that run as one ``gather(parts)``."""
    out: list[T] = []
    pending: list[P] = []
    for converted, parts, tool in entries:
        if pending and not tool:
            out.append(gather(pending))
            pending = []
        if converted is not None:
            out.append(converted)
        pending.extend(parts)
    if pending:
        out.append(gather(pending))
    return out


def choose_tool(choice: str | dict[str, Any], named: str, mode: Callable[[str], Any]) -> Any:
    """A ``tool_choice`` in an API's shape: one tool as ``{"type": named, "name": ...}`` (a dict
    with a ``type`` as it is), else ``mode("auto" | "none" | "required")`` ("any" is "required")."""
    if isinstance(choice, dict):
        return choice if "type" in choice else {"type": named, "name": choice["name"]}
    if choice in ("auto", "none", "required", "any"):
        return mode("required" if choice == "any" else choice)
    return {"type": named, "name": choice}


def put_settings(target: dict[str, Any], request: Any, names: Mapping[str, str]) -> None:
    """The request's settings that are set, in ``target`` under their wire ``names``."""
    for field, name in names.items():
        value = getattr(request, field)
        if value is not None:
            target[name] = value


def unwrap_schema(response_format: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema in a ``response_format`` (bare, in ``{"schema"}`` or OpenAI's shape)."""
    inner = response_format.get("json_schema")
    if isinstance(inner, dict):
        response_format = inner
    schema = response_format.get("schema")
    if isinstance(schema, dict) and "properties" not in response_format:
        return schema
    return response_format


def merge_extra(body: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``extra_body`` merged last, one level deep (a dict adds to the body's dict)."""
    for key, value in extra.items():
        current = body.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            body[key] = {**current, **value}
        else:
            body[key] = value
    return body


def put_prompt_cache(body: dict[str, Any], request: Any) -> None:
    """OpenAI's prompt-cache fields (Chat Completions and Responses, OpenAI and Azure):
    the key when one is set, and 24-hour retention for ``prompt_cache="long"``; nothing
    for ``"short"`` (the organisation's default) or ``"off"``."""
    if request.prompt_cache == "off":
        return
    if request.prompt_cache_key:
        body["prompt_cache_key"] = request.prompt_cache_key
    if request.prompt_cache == "long":
        body["prompt_cache_retention"] = "24h"
