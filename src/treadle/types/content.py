"""Content blocks: the pieces a message is made of (discriminator ``type``)."""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal, Union

from pydantic import Field, field_validator

from ..errors import ConfigurationError
from ._watch import Watched
from .files import FileContent as FileContent
from .text import clean_text


class TextContent(Watched):
    """Plain text. Lone surrogates (text that was not valid UTF-8, decoded with
    ``surrogateescape``) become U+FFFD here, so no message can poison JSON or a store."""

    type: Literal["text"] = "text"
    text: str

    @field_validator("text", mode="after")
    @classmethod
    def _valid_unicode(cls, value: str) -> str:
        return clean_text(value)


class ImageContent(Watched):
    """An image, base64-encoded: ``ImageContent.from_bytes(path.read_bytes(), "image/png")``.

    Send it in a user message (``UserMessage.of("What is this?", image)``) or return it in a
    tool result; adapters encode it the way their provider expects.
    """

    type: Literal["image"] = "image"
    data: str
    mime_type: str

    @classmethod
    def from_bytes(cls, data: bytes, mime_type: str) -> ImageContent:
        """An image from its raw bytes (PNG, JPEG, GIF, WebP: whatever the model accepts)."""
        if not mime_type.startswith("image/"):
            raise ConfigurationError(
                f"mime_type must be an image type such as 'image/png', not {mime_type!r}"
            )
        return cls(data=base64.b64encode(data).decode("ascii"), mime_type=mime_type)


class ThinkingContent(Watched):
    """Reasoning the model showed (or hid, when ``redacted``).

    ``signature`` is opaque and only meaningful to the provider that produced it; it is sent
    back unchanged to that provider and dropped for any other.
    """

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None
    redacted: bool = False


class ToolCall(Watched):
    """A request from the model to run a tool.

    When the model's argument text was not valid JSON, ``arguments`` is ``{}`` and the text is
    kept in ``raw_arguments`` so nothing is lost.
    """

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None


UserContent = Annotated[Union[TextContent, ImageContent, FileContent], Field(discriminator="type")]
AssistantContent = Annotated[
    Union[TextContent, ThinkingContent, ToolCall], Field(discriminator="type")
]
ContentBlock = Annotated[
    Union[TextContent, ImageContent, FileContent, ThinkingContent, ToolCall],
    Field(discriminator="type"),
]
