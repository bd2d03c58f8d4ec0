"""Content blocks: the pieces a message is made of (discriminator ``type``)."""

from __future__ import annotations

import base64
import inspect
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import Field, SerializerFunctionWrapHandler, field_validator, model_serializer

from ..errors import ConfigurationError
from ._base import Model
from ._watch import Watched
from .files import FileContent as FileContent
from .text import clean_text


class Citation(Model):
    """Where part of an answer came from: a web page, a document you sent, a file.

    Models that cite their sources put these on the text they wrote
    (``TextContent.citations``); each adapter reads its provider's own shape into this one
    (docs/providers.md#citations). Every field is optional: a provider fills what it knows,
    and what it did not say is left out of the JSON.

    Example:
        ```python
        from treadle import TextContent
        from treadle.types import Citation

        page = Citation(kind="url_citation", url="https://example.com/tea", start=0, end=26)
        block = TextContent(text="Green tea is not oxidised. It is steamed.", citations=[page])
        cited = block.citations[0]
        assert block.text[cited.start : cited.end] == "Green tea is not oxidised."
        ```
    """

    kind: str = ""
    """The provider's own name for the kind of citation: ``"char_location"``,
    ``"page_location"``, ``"content_block_location"``, ``"web_search_result_location"``,
    ``"search_result_location"`` (Anthropic), ``"url_citation"``, ``"file_citation"``,
    ``"container_file_citation"`` (OpenAI), ``"web"``, ``"retrievedContext"``, ``"maps"``
    (Gemini's grounding), ``"documentChar"``, ``"documentPage"``, ``"documentChunk"``,
    ``"searchResultLocation"`` (Bedrock)."""
    url: str | None = None
    """The web page cited."""
    title: str | None = None
    """The page's or document's title, or the cited file's name."""
    cited_text: str | None = None
    """The source's words the answer relies on, where the provider quotes them."""
    document_index: int | None = None
    """Which of the request's documents (0-based, in the order they were sent) it cites;
    for a search result location, which search result."""
    file_id: str | None = None
    """The provider's id of the cited file (its Files API, a vector store, a container)."""
    start: int | None = None
    """Where the supported text begins in this block's text: ``text[start:end]`` is what
    the source backs. ``None`` when the provider cites the whole block (Anthropic splits
    its answer into a block per cited passage)."""
    end: int | None = None
    """Where the supported text ends (exclusive); equal to ``start`` for a citation that
    marks one point of the text (OpenAI ``file_citation``)."""
    source_start: int | None = None
    """Where the cited passage begins in the source, in the unit ``kind`` says: characters
    (``char_location``, ``documentChar``), pages, 1-based (``page_location``,
    ``documentPage``), or content blocks (``content_block_location``,
    ``search_result_location``, ``documentChunk``, ``searchResultLocation``)."""
    source_end: int | None = None
    """Where the cited passage ends in the source (exclusive), in the same unit."""

    def __repr_args__(self) -> Any:
        return [(k, v) for k, v in super().__repr_args__() if v is not None]

    if not TYPE_CHECKING:

        @model_serializer(mode="wrap")
        def _serialize(self, handler: SerializerFunctionWrapHandler):
            # What the provider did not say stays out of stored sessions and streams.
            return {key: value for key, value in handler(self).items() if value is not None}


def _no_citations(value: list[Citation]) -> bool:
    return not value


# Pydantic 2.12 leaves a field out of the JSON by its value (``exclude_if``); an older one
# gets the same from a serializer around the whole block (slower: only where it must).
_LEAVE_OUT_EMPTY = "exclude_if" in inspect.signature(Field).parameters
_EMPTY_LEFT_OUT: dict[str, Any] = {"exclude_if": _no_citations} if _LEAVE_OUT_EMPTY else {}


class TextContent(Watched):
    """Plain text. Lone surrogates (text that was not valid UTF-8, decoded with
    ``surrogateescape``) become U+FFFD here, so no message can poison JSON or a store.

    ``citations``: the sources a model cited for this text (empty unless the provider sent
    some; left out of the JSON when empty). They are never sent back to a model: a message
    with citations goes back as its text."""

    type: Literal["text"] = "text"
    text: str
    citations: list[Citation] = Field(default_factory=list, **_EMPTY_LEFT_OUT)

    @field_validator("text", mode="after")
    @classmethod
    def _valid_unicode(cls, value: str) -> str:
        return clean_text(value)

    def __repr_args__(self) -> Any:
        return [(k, v) for k, v in super().__repr_args__() if k != "citations" or v]

    if not TYPE_CHECKING and not _LEAVE_OUT_EMPTY:

        @model_serializer(mode="wrap")
        def _serialize(self, handler: SerializerFunctionWrapHandler):
            # No return annotation: pydantic then keeps the fields' serialization schema.
            return _without_empty_citations(handler(self))


def _without_empty_citations(data: Any) -> Any:
    """A text block's dumped fields without ``citations`` when it has none (the serializer
    older pydantic versions use)."""
    if isinstance(data, dict) and not data.get("citations"):
        data.pop("citations", None)
    return data


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
