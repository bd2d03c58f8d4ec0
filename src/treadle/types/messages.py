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
    """What the user said (or your application, on the user's behalf).

    A run starts from one: ``agent_loop("hi", ...)`` and ``Agent.run("hi")`` make it from
    the string. Steering and follow-up messages are user messages too. ``content`` is a
    list of text and image blocks; a string given as ``content`` becomes one text block, and
    ``UserMessage.of(text, *images)`` is the short form. ``text`` joins the text blocks.

    Example:
        ```python
        from treadle import UserMessage
        from treadle.types import ImageContent

        photo = ImageContent.from_bytes(b"(the bytes of a PNG file)", "image/png")
        prompt = UserMessage.of("What is in this picture?", photo)
        assert prompt.role == "user" and prompt.text == "What is in this picture?"
        assert len(prompt.content) == 2  # a text block and the image
        ```
    """

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
    """One answer from the model: what it said, thought and asked to call, why it stopped,
    and what it cost.

    The loop makes one per model call and appends it to the history. You meet them in
    ``context.messages`` and ``RunResult.messages``, in ``message_end`` events, and, still
    growing, as the ``message`` of each ``message_update``. You write one yourself to script
    a model in tests (``ScriptedProvider`` takes them) or to rebuild a stored history.

    ``content`` holds text, thinking and ``ToolCall`` blocks in the order the model gave
    them; ``text``, ``thinking`` and ``tool_calls`` read them out. ``stop_reason`` says how
    it ended: ``stop`` (done), ``tool_use`` (it asks for tools; a ``ToolResultMessage`` for
    each call follows), ``length`` (it hit ``max_tokens``), ``error`` (the call failed:
    ``error`` says why) or ``aborted`` (cancelled: what arrived is kept). ``usage`` is this
    call's tokens and cost; ``model`` and ``provider`` say who answered.

    Example:
        ```python
        from treadle import AssistantMessage, TextContent, ToolCall

        answer = AssistantMessage(
            content=[
                TextContent(text="Let me look that up."),
                ToolCall(id="c1", name="search", arguments={"q": "green tea"}),
            ],
            stop_reason="tool_use",
        )
        assert answer.text == "Let me look that up."
        assert [call.name for call in answer.tool_calls] == ["search"]
        ```
    """

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
    """The answer to one tool call, as the model will read it.

    The loop appends one for each call of an assistant message (``tool_call_id`` names the
    call), in the history, before the next assistant message. It holds what the tool
    returned, or an error when the tool raised, timed out or a hook denied the call
    (``is_error``), or ``Cancelled`` when the run was cancelled (``cancelled``). You write
    one yourself to answer a call the loop does not run (an ``ExternalTool``) before
    continuing the run.

    ``content`` is what the model reads: text and image blocks (a string becomes one text
    block). ``details`` is anything for your application (a UI, a log); it is kept in the
    history and never sent to a model.

    Example:
        ```python
        from treadle import ToolResultMessage

        found = ToolResultMessage(
            tool_call_id="c1", tool_name="search", content="3 shops sell green tea",
            details={"shop_ids": [4, 8, 15]},
        )
        assert found.text == "3 shops sell green tea" and not found.is_error
        ```
    """

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
    """A record of your application's, kept in the history, that no model ever sees.

    Use it for what belongs with the conversation but not in the prompt: a note that the
    user switched models, a decision made in your UI, a bookmark. ``kind`` names it
    (namespace it: ``"myapp.note"``) and ``data`` is any JSON. It is stored, reported and
    kept in order like any other message, and left out of every model request.

    Example:
        ```python
        from treadle import AgentContext, UserMessage
        from treadle.types import ExtensionMessage

        note = ExtensionMessage(kind="myapp.note", data={"switched_to": "a smaller model"})
        context = AgentContext(messages=[UserMessage.of("hi"), note])
        assert context.request_history() == context.messages[:1]  # the note stays out
        ```
    """

    role: Literal["extension"] = "extension"
    kind: str
    data: Any = None
    timestamp: int = Field(default_factory=now_ms)


AgentMessage = Annotated[
    Union[UserMessage, AssistantMessage, ToolResultMessage, ExtensionMessage],
    Field(discriminator="role"),
]
"""Any message in a history."""
