"""The Provider protocol, the request it takes, the events it streams and the errors it
raises: the loop knows providers only through this file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal, Protocol, Union, runtime_checkable

from pydantic import BeforeValidator, Field

from ..cancellation import CancellationToken
from ..errors import TreadleError
from ..types import (
    AgentMessage,
    AssistantMessage,
    Citation,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolSpec,
)
from ..types._base import Model

ThinkingLevel = Literal["off", "minimal", "low", "medium", "high"]
PromptCache = Literal["off", "short", "long"]
"""The prompt cache's retention (``ModelSettings(prompt_cache=...)``)."""
ErrorKind = Literal[
    "rate_limit",
    "overloaded",
    "server",
    "network",
    "unreachable",
    "timeout",
    "truncated_stream",
    "auth",
    "bad_request",
    "context_overflow",
    "cancelled",
    "provider_bug",
    "content_filter",
]
RETRYABLE_KINDS: frozenset[str] = frozenset(
    {"rate_limit", "overloaded", "server", "network", "timeout", "truncated_stream"}
)


# A string given as stop sequences is one sequence, never a list of its characters.
_one_sequence = BeforeValidator(lambda value: [value] if isinstance(value, str) else value)
StopSequences = Annotated[Union[list[str], None], _one_sequence]


class ModelRequest(Model):
    """Everything one model call needs, independent of any provider's wire format."""

    model: str = ""
    system_prompt: str | None = None
    messages: list[AgentMessage] = Field(default_factory=list)
    tools: list[ToolSpec] = Field(default_factory=list)
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    """For reproducible sampling, where the provider supports it (OpenAI-compatible servers,
    Gemini, Ollama)."""
    stop: StopSequences = None
    """Stop sequences (a string is one sequence)."""
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    thinking_level: ThinkingLevel = "off"
    tool_choice: str | dict[str, Any] | None = None
    """"auto", "none", "required" or {"name": tool}; None leaves it to the provider."""
    response_format: dict[str, Any] | None = None
    """A JSON schema the answer must follow, where the provider supports it."""
    prompt_cache: PromptCache = "short"
    """How long the provider keeps the prompt's cached prefix: ``"short"`` (its default:
    Anthropic's 5 minutes, OpenAI's in-memory), ``"long"`` (Anthropic's 1 hour, OpenAI's
    24 hours) or ``"off"`` (no cache points). docs/providers.md#prompt-caching."""
    prompt_cache_key: str | None = None
    """Groups requests that share a prefix, for the providers that route by it (OpenAI and
    Azure ``prompt_cache_key``): a conversation's or a user's id. Never a secret."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Provider-specific fields merged into the request body as they are."""
    purpose: str = "turn"
    """What the call is for (never sent): ``"turn"`` (a turn of the loop, the final answer
    at a limit included), ``"planning"``, ``"compaction"`` (a summary) or ``"worker"`` (a
    post-run worker). Every call goes through the ``before_model_request`` hooks; one that
    shapes turns only (tools, plan mode) may leave the others alone."""
    coalesce_deltas: bool = False
    """Whether the adapter merges the deltas to one block that arrive in one read of the
    body into one event (never sent). Off for a request made by hand, so an adapter used on
    its own yields every wire event; the loop sets it on each call from
    ``AgentLoopConfig.coalesce_deltas``."""


# ---- stream events: what Provider.stream yields ----


class StreamStart(Model):
    type: Literal["start"] = "start"
    model: str = ""
    response_id: str | None = None


class TextStart(Model):
    type: Literal["text_start"] = "text_start"
    index: int


class TextEnd(Model):
    """A text block is complete. ``citations``: the sources the model cited for it (its
    ``TextContent.citations``), which the loop puts on the block of the partial message."""

    type: Literal["text_end"] = "text_end"
    index: int
    citations: list[Citation] = Field(default_factory=list)


class ThinkingStart(Model):
    type: Literal["thinking_start"] = "thinking_start"
    index: int
    redacted: bool = False


class ThinkingEnd(Model):
    type: Literal["thinking_end"] = "thinking_end"
    index: int
    signature: str | None = None


class StreamDone(Model):
    """The last event of a successful stream: the complete message, usage and stop reason."""

    type: Literal["done"] = "done"
    message: AssistantMessage


class StreamFallback(Model):
    """A :class:`~treadle.providers.FallbackModel` moves on to its next model: the one
    answering (``from_*``) failed with ``error_kind``, and whatever it streamed is void; the
    events that follow are the next model's (``to_*``). The loop reports it as a
    ``provider_fallback`` event, unless a tool call of this turn already ran and
    ``after_tool_call`` is False: then the failure stands (docs/providers.md#fallback)."""

    type: Literal["fallback"] = "fallback"
    from_provider: str
    from_model: str
    to_provider: str
    to_model: str
    error_kind: ErrorKind
    status_code: int | None = None
    message: str = ""
    after_tool_call: bool = False
    """Whether the fallback may go ahead after a tool call of the turn already ran."""


StreamEvent = Union[
    StreamStart,
    TextStart,
    TextDelta,
    TextEnd,
    ThinkingStart,
    ThinkingDelta,
    ThinkingEnd,
    ToolCallStart,
    ToolCallDelta,
    ToolCallEnd,
    StreamFallback,
    StreamDone,
]
"""What a provider streams. ``index`` is the content block's position in the message.

Start and end events are optional for consumers: a delta for a new index opens its block.
"""


class ProviderError(TreadleError):
    """A model call failed. ``kind`` says how, and whether trying again can help; the message
    is the provider's own (never the request's headers or key)."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        status_code: int | None = None,
        retry_after: float | None = None,
        provider: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.status_code = status_code
        self.retry_after = retry_after
        self.provider = provider

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE_KINDS

    def __repr__(self) -> str:
        return (
            f"ProviderError(kind={self.kind!r}, message={self.message!r}, "
            f"status_code={self.status_code!r}, retry_after={self.retry_after!r})"
        )

    def __str__(self) -> str:
        where = f"{self.provider} " if self.provider else ""
        status = f" (HTTP {self.status_code})" if self.status_code else ""
        return f"{where}{self.kind}{status}: {self.message}"


@runtime_checkable
class Provider(Protocol):
    """A model API: ``stream`` yields :data:`StreamEvent` values ending with one
    :class:`StreamDone`, or raises :class:`ProviderError` (docs/providers.md)."""

    name: str

    def stream(
        self, request: ModelRequest, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[StreamEvent]: ...
