"""Messages: one conversation history is a list of these (discriminator ``role``)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import Field, field_validator, model_validator

from ..errors import UsageError
from ._base import now_ms
from ._watch import Watched
from .content import (
    AssistantContent,
    FileContent,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserContent,
)
from .usage import ErrorInfo, StopReason, Usage


def _text_to_blocks(value: Any) -> Any:
    if isinstance(value, str):
        return [TextContent(text=value)]
    return value


def joined_text(content: list[Any]) -> str:
    """The text blocks of ``content`` joined with newlines."""
    return "\n".join(block.text for block in content if isinstance(block, TextContent))


class _Message(Watched):
    """Messages take keyword arguments only; a positional one (``UserMessage("hi")``) gets
    an error that shows the keyword form, not pydantic's bare count of arguments."""

    if not TYPE_CHECKING:  # type checkers keep the keyword-only signature pydantic makes

        def __init__(self, *args: Any, **data: Any) -> None:
            if args:
                raise _positional(type(self), args)
            super().__init__(**data)


def _positional(cls: type[_Message], args: tuple[Any, ...]) -> UsageError:
    name = cls.__name__
    if cls is UserMessage and len(args) == 1 and isinstance(args[0], str):
        how = f"UserMessage.of({args[0]!r}) or UserMessage(content={args[0]!r})"
    else:
        required = [f for f, info in cls.model_fields.items() if info.is_required()]
        required = required or ["content"]
        how = f"{name}({', '.join(f'{f}=...' for f in required)})"
    return UsageError(f"{name} takes keyword arguments only, not positional ones: write {how}")


class UserMessage(_Message):
    """What the user (or the application on the user's behalf) said."""

    role: Literal["user"] = "user"
    content: list[UserContent]
    timestamp: int = Field(default_factory=now_ms)
    cache_point: bool = False
    """Cache the prompt up to the end of this message: an explicit cache point, where the
    provider takes one (Anthropic ``cache_control``, Bedrock ``cachePoint``); others ignore
    it (docs/providers.md#prompt-caching)."""

    _coerce = field_validator("content", mode="before")(_text_to_blocks)

    @classmethod
    def of(
        cls,
        text: str,
        *images: ImageContent | FileContent,
        files: Iterable[FileContent | str | os.PathLike[str]] = (),
    ) -> UserMessage:
        """A user message with ``text``, optional images and ``files`` (blocks, or paths read
        with :meth:`FileContent.from_path`): ``UserMessage.of("Sum up", files=["a.pdf"])``."""
        attached = [f if isinstance(f, FileContent) else FileContent.from_path(f) for f in files]
        return cls(content=[TextContent(text=text), *images, *attached])

    @property
    def text(self) -> str:
        return joined_text(self.content)


class AssistantMessage(_Message):
    """One model response: text, thinking and tool calls, with why it stopped and its usage."""

    role: Literal["assistant"] = "assistant"
    content: list[AssistantContent] = Field(default_factory=list)
    stop_reason: StopReason = "stop"
    model: str = ""
    provider: str = ""
    usage: Usage = Field(default_factory=Usage)
    timestamp: int = Field(default_factory=now_ms)
    response_id: str | None = None
    error: ErrorInfo | None = None
    cache_point: bool = False
    """Cache the prompt up to the end of this message: an explicit cache point, where the
    provider takes one (Anthropic ``cache_control``, Bedrock ``cachePoint``); others ignore
    it (docs/providers.md#prompt-caching)."""

    _coerce = field_validator("content", mode="before")(_text_to_blocks)

    @property
    def text(self) -> str:
        """The message's text blocks joined with newlines (thinking excluded)."""
        return joined_text(self.content)

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [block for block in self.content if isinstance(block, ToolCall)]

    @property
    def thinking(self) -> str:
        return "\n".join(
            b.thinking for b in self.content if isinstance(b, ThinkingContent) and b.thinking
        )


CANCELLED_TEXT = "Cancelled"
"""The text of a cancelled call's result (what the model reads), and of the result a stored
session gives a call that never got one (a crash, a torn write)."""


def marked_if_cancelled(data: Any) -> Any:
    """A result stored before ``cancelled`` existed was marked by its text alone: read it
    as it was meant (an error whose whole text is ``Cancelled``)."""
    if (
        isinstance(data, dict)
        and "cancelled" not in data
        and data.get("is_error") is True
        and _only_text(data.get("content")) == CANCELLED_TEXT
    ):
        return {**data, "cancelled": True}
    return data


def _only_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and len(content) == 1:
        block = content[0]
        if isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            return text if isinstance(text, str) else None
    return None


class ToolResultMessage(_Message):
    """The answer to one tool call. ``details`` is for applications and never sent to a model."""

    role: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    tool_name: str
    content: list[UserContent] = Field(default_factory=list)
    details: Any = None
    is_error: bool = False
    cancelled: bool = False
    """The call did not run to its end: the run was cancelled (or the call was left
    unanswered and answered ``Cancelled`` when a session was resumed or branched).
    ``is_error`` is true as well. Tell a cancellation by this field, never by the text."""
    timestamp: int = Field(default_factory=now_ms)
    cache_point: bool = False
    """Cache the prompt up to the end of this message: an explicit cache point, where the
    provider takes one (Anthropic ``cache_control``, Bedrock ``cachePoint``); others ignore
    it (docs/providers.md#prompt-caching)."""

    _coerce = field_validator("content", mode="before")(_text_to_blocks)

    _legacy = model_validator(mode="before")(marked_if_cancelled)

    @property
    def text(self) -> str:
        return joined_text(self.content)


class ExtensionMessage(_Message):
    """Application data kept in the history but never sent to a provider."""

    role: Literal["extension"] = "extension"
    kind: str
    data: Any = None
    timestamp: int = Field(default_factory=now_ms)


AgentMessage = Annotated[
    Union[UserMessage, AssistantMessage, ToolResultMessage, ExtensionMessage],
    Field(discriminator="role"),
]
"""Any message in a history."""
