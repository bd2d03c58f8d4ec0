"""Compaction: make a history fit its context window again.

A :class:`CompactionPolicy` says when (thresholds as shares of the window, seed 003) and how
(strategies in order, seed 002's levels): by default long tool outputs are trimmed first
(seed 001), then the middle of the conversation is summarised by a model call, and only if
that is not enough are the oldest messages dropped. Every strategy works on whole *groups*
— a user message, or an assistant message with the results of its tool calls — so a tool
call is never separated from its result, and the system prompt (which is not part of the
history) is never touched. The result passes :func:`validate_transcript`.

:func:`compact` runs a policy over a list of messages and returns a new list; it does not
change its input. The loop calls it automatically (``AgentLoopConfig(compaction=...)``);
applications call it on demand.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Union, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .._signals import CompactionCancelled
from ..cancellation import CancellationToken
from ..errors import ConfigurationError
from ..providers.base import ModelRequest, Provider, ProviderError, StreamDone
from ..types import (
    AgentMessage,
    AssistantMessage,
    ExtensionMessage,
    ImageContent,
    TextContent,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .catalog import DEFAULT_CONTEXT_WINDOW, ModelCatalog, ModelInfo, lookup_model, with_cost
from .files import attachments, dropped_note
from .tokens import CHARS_PER_TOKEN, ContextTracker, TokenCounter, heuristic_tokens

logger = logging.getLogger("treadle.context")
logger.addHandler(logging.NullHandler())  # a library logs only where the app says

DEFAULT_SUMMARY_PROMPT = (
    "You condense the earlier part of a conversation between a user and an AI assistant "
    "that uses tools, so that the assistant can carry on without it. Write a concise summary "
    "that keeps: what the user asked for and why; decisions and constraints agreed on; facts "
    "and results found (names, paths, values, identifiers, errors and their fixes); what has "
    "been done and what is still to do. Drop small talk and anything later superseded. Write "
    "in the conversation's language, in plain prose or short lists. Reply with the summary "
    "only."
)
SUMMARY_PREFIX = (
    "[Summary of the earlier conversation, condensed to save context space. It is background "
    "for what follows, not a new request.]\n\n"
)
TRUNCATION_NOTE = "[{count} earlier messages were removed to fit the context window.]"
TRIM_MARKER = (
    "\n\n[... {chars:,} characters (about {tokens:,} tokens) of this tool output were cut to "
    "save context ...]\n\n"
)


# ---- groups ----


def message_groups(messages: Sequence[AgentMessage]) -> list[tuple[int, int]]:
    """``[start, end)`` ranges that compaction keeps or removes whole: each user message,
    and each assistant message together with the tool results (and extension messages)
    that follow it."""
    groups: list[tuple[int, int]] = []
    start = 0
    for i, message in enumerate(messages):
        if i > start and isinstance(message, (UserMessage, AssistantMessage)):
            groups.append((start, i))
            start = i
    if messages:
        groups.append((start, len(messages)))
    return groups


def pending_calls(messages: Sequence[AgentMessage]) -> list[str]:
    """Calls of the last assistant message without a result (a suspended run's)."""
    answered: set[str] = set()
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            return [c.id for c in message.tool_calls if c.id not in answered]
        if isinstance(message, ToolResultMessage):
            answered.add(message.tool_call_id)
        elif isinstance(message, UserMessage):
            return []
    return []


# ---- the job strategies work on ----


SummaryCall = Callable[[ModelRequest, Provider], Awaitable[AssistantMessage]]
"""Makes a summary call: the request (model, system prompt, messages, max_tokens) and the
provider it goes to; returns the answer (``stop_reason`` ``error`` / ``aborted`` when it
failed / was cancelled)."""


@dataclass
class CompactionJob:
    """The state one compaction works on. Strategies read and replace ``messages`` through
    :meth:`replace` / :meth:`set_messages` so the running token total stays right."""

    messages: list[AgentMessage]
    policy: CompactionPolicy
    target: int
    window: int
    fixed: int
    tracker: ContextTracker
    provider: Provider | None = None
    model: str = ""
    cancel: CancellationToken | None = None
    force: bool = False
    complete: SummaryCall | None = None
    """How the summary call is made: the loop's model-call path (its hooks, retries and
    settings) when compaction runs for a loop or an Agent; a bare provider call without."""
    usage: Usage = field(default_factory=Usage)
    summary: str | None = None
    summary_message: UserMessage | None = None
    total: int = 0

    def __post_init__(self) -> None:
        self.total = self.fixed + sum(self.count(m) for m in self.messages)

    def count(self, message: AgentMessage) -> int:
        return self.tracker.count(message)

    def over(self, extra: int = 0) -> bool:
        """True while the history is larger than the target."""
        return self.total + extra > self.target

    def replace(self, index: int, message: AgentMessage) -> None:
        self.total += self.count(message) - self.count(self.messages[index])
        self.messages[index] = message

    def set_messages(self, messages: list[AgentMessage]) -> None:
        self.messages = messages
        self.total = self.fixed + sum(self.count(m) for m in messages)

    def group_tokens(self, group: tuple[int, int]) -> int:
        return sum(self.count(m) for m in self.messages[group[0] : group[1]])

    def split(self) -> tuple[list[tuple[int, int]], int, int]:
        """``(groups, head, recent)``: groups ``[:head]`` are the first exchange kept
        verbatim, groups ``[recent:]`` the most recent turns kept verbatim (at least the
        last group), the ones between are the middle."""
        groups = message_groups(self.messages)
        if not groups:
            return groups, 0, 0
        head = 0
        first_budget = int(self.target * self.policy.keep_first)
        first_is_user = isinstance(self.messages[groups[0][0]], UserMessage)
        if first_budget > 0 and len(groups) > 1 and first_is_user:  # the last group is recent
            used = self.group_tokens(groups[0])
            if used <= first_budget:
                head = 1
                if len(groups) > 2 and isinstance(self.messages[groups[1][0]], AssistantMessage):
                    used += self.group_tokens(groups[1])
                    if used <= first_budget:
                        head = 2
        budget = self.policy.recent_budget(self.target)
        recent = len(groups) - 1
        used = self.group_tokens(groups[recent])
        while recent - 1 >= head:
            more = self.group_tokens(groups[recent - 1])
            if used + more > budget:
                break
            used += more
            recent -= 1
        return groups, head, max(recent, head)


@runtime_checkable
class CompactionStrategy(Protocol):
    """One way to make a history smaller. ``apply`` changes ``job.messages`` (through the
    job's methods) and returns True when it changed anything. A ``last_resort`` strategy
    runs only while the history is over the target, never just because compaction was
    asked for."""

    name: str
    last_resort: bool

    async def apply(self, job: CompactionJob) -> bool: ...


# ---- strategies ----


def trim_text(text: str, head_chars: int, tail_chars: int, chars_per_token: float) -> str | None:
    """``text`` with its middle replaced by a marker saying how much was cut; ``None``
    when it is short enough already."""
    cut = len(text) - head_chars - tail_chars
    if cut <= 2 * len(TRIM_MARKER):
        return None
    marker = TRIM_MARKER.format(chars=cut, tokens=math.ceil(cut / chars_per_token))
    tail = text[len(text) - tail_chars :] if tail_chars > 0 else ""
    return text[:head_chars] + marker + tail


@dataclass(frozen=True, slots=True)
class TrimToolOutputs:
    """Cut the middle out of tool outputs longer than ``max_tokens``, keeping the first
    ``head_tokens`` and the last ``tail_tokens`` with a marker that says how much was cut
    (seed 001). Images in a trimmed result are replaced by a note. Older outputs go first;
    the recent turns' outputs only if that is not enough. ``max_tokens`` is capped at an
    eighth of the compaction target so small windows trim proportionally."""

    max_tokens: int = 2000
    head_tokens: int = 800
    tail_tokens: int = 400
    name: str = "trim_tool_outputs"
    last_resort: bool = False

    def __post_init__(self) -> None:
        if self.head_tokens + self.tail_tokens >= self.max_tokens:
            raise ConfigurationError("head_tokens + tail_tokens must be less than max_tokens")

    def trimmed(self, message: ToolResultMessage, tokens: int, limit: int) -> ToolResultMessage:
        scale = limit / self.max_tokens
        text = message.text
        chars_per_token = max(1.0, len(text) / tokens) if tokens else CHARS_PER_TOKEN
        head = int(self.head_tokens * scale * chars_per_token)
        tail = int(self.tail_tokens * scale * chars_per_token)
        new_text = trim_text(text, head, tail, chars_per_token) or text
        images = sum(isinstance(b, ImageContent) for b in message.content)
        if images:
            new_text += f"\n[{images} image(s) removed to save context]"
        new_text += dropped_note([message])
        return message.model_copy(update={"content": [TextContent(text=new_text)]})

    async def apply(self, job: CompactionJob) -> bool:
        limit = max(64, min(self.max_tokens, job.target // 8))
        groups, _head, recent = job.split()
        if not groups:
            return False
        recent_start = groups[recent][0]
        changed = False
        for older, (lo, hi) in (
            (True, (0, recent_start)),
            (False, (recent_start, len(job.messages))),
        ):
            if not older and not job.over():
                break
            for i in range(lo, hi):
                if not job.over() and not (job.force and older):
                    return changed
                message = job.messages[i]
                if not isinstance(message, ToolResultMessage):
                    continue
                tokens = job.count(message)
                if tokens <= limit:
                    continue
                new = self.trimmed(message, tokens, limit)
                if job.count(new) < tokens:
                    job.replace(i, new)
                    changed = True
        return changed


def _clip(text: str, limit_chars: int) -> str:
    return trim_text(text, limit_chars * 2 // 3, limit_chars // 3, CHARS_PER_TOKEN) or text


def render_transcript(messages: Sequence[AgentMessage], clip_chars: int = 4000) -> list[str]:
    """``messages`` as plain text for a summariser, one entry per message (tool outputs
    and arguments clipped to ``clip_chars``)."""
    lines: list[str] = []
    for message in messages:
        if isinstance(message, UserMessage):
            lines.append(f"User: {_clip(message.text, clip_chars)}{attachments(message)}")
        elif isinstance(message, AssistantMessage):
            parts = []
            if message.text:
                parts.append(f"Assistant: {_clip(message.text, clip_chars)}")
            for call in message.tool_calls:
                args = call.raw_arguments
                if args is None:
                    args = json.dumps(call.arguments, ensure_ascii=False)
                parts.append(f"Assistant called {call.name}({_clip(args, clip_chars // 4)})")
            if message.error is not None:
                parts.append(f"[The assistant's turn failed: {message.error.message}]")
            if parts:
                lines.append("\n".join(parts))
        elif isinstance(message, ToolResultMessage):
            status = " (error)" if message.is_error else ""
            lines.append(
                f"Result of {message.tool_name}{status}: {_clip(message.text, clip_chars)}"
                + attachments(message)
            )
    return lines


MIN_SUMMARY_INPUT_TOKENS = 200
"""A middle smaller than this is never sent to the summary model: no summary would save
anything, so the call would only cost money."""


@dataclass(frozen=True, slots=True)
class Summarize:
    """Replace the middle of the conversation with a summary written by a model.

    Kept verbatim: the first exchange (``CompactionPolicy.keep_first``) and the most recent
    turns (``CompactionPolicy.keep_recent``). The summary goes in as one *user* message
    right after the first exchange, labelled as a summary: every provider accepts a user
    message at any point of a history (adapters merge it with a neighbouring user turn where
    roles must alternate), whereas an assistant message would be refused as the first
    message and would be merged into an assistant turn that starts with thinking. The call
    goes to ``CompactionPolicy.summary_provider`` (else the loop's provider); a middle too
    large for one call is summarised in chunks, each call folding the summary so far into
    the next. If the model call fails, the strategy changes nothing and the next one runs.
    """

    name: str = "summarize"
    last_resort: bool = False

    async def apply(self, job: CompactionJob) -> bool:
        groups, head, recent = job.split()
        if recent <= head:
            return False
        start, end = groups[head][0], groups[recent][0]
        middle = job.messages[start:end]
        if not any(not isinstance(m, ExtensionMessage) for m in middle):
            return False
        if sum(job.count(m) for m in middle) < MIN_SUMMARY_INPUT_TOKENS:
            return False  # a summary could not be shorter: no paid call for nothing
        text = await summarize_messages(middle, job)
        if not text:
            return False
        note = dropped_note(middle)  # the files summarised away, named
        message = UserMessage(content=[TextContent(text=SUMMARY_PREFIX + text + note)])
        if job.count(message) >= sum(job.count(m) for m in middle):
            return False  # the summary would not save anything
        kept = [m for m in middle if isinstance(m, ExtensionMessage)]
        job.set_messages([*job.messages[:start], *kept, message, *job.messages[end:]])
        job.summary = text
        job.summary_message = message
        return True


@dataclass(frozen=True, slots=True)
class TruncateOldest:
    """Last resort: drop the oldest groups until the history fits, keeping the newest group,
    a summary made by this compaction and, while possible, the first exchange. A user note
    saying how many messages went marks the cut (so the history still starts with a user
    message)."""

    name: str = "truncate_oldest"
    last_resort: bool = True

    async def apply(self, job: CompactionJob) -> bool:
        groups, head, _recent = job.split()
        if len(groups) < 2:
            return False
        # the note as long as it can get: its count is at most the number of messages
        note_tokens = job.count(UserMessage.of(TRUNCATION_NOTE.format(count=len(job.messages))))
        last = len(groups) - 1
        order = [*range(head, last), *range(0, head)]
        drop: set[int] = set()
        saved = 0
        for g in order:
            if not job.over(note_tokens - saved):
                break
            lo, hi = groups[g]
            if job.summary_message is not None and any(
                m is job.summary_message for m in job.messages[lo:hi]
            ):
                continue
            drop.add(g)
            saved += job.group_tokens(groups[g])
        if not drop:
            return False
        removed = 0
        out: list[AgentMessage] = []
        first_cut = min(drop)
        note_at = 0
        for g, (lo, hi) in enumerate(groups):
            if g == first_cut:
                out.append(UserMessage.of(""))  # placeholder for the note
                note_at = len(out) - 1
            if g in drop:
                for m in job.messages[lo:hi]:
                    if isinstance(m, ExtensionMessage):
                        out.append(m)
                    else:
                        removed += 1
            else:
                out.extend(job.messages[lo:hi])
        gone = dropped_note(m for g in sorted(drop) for m in job.messages[slice(*groups[g])])
        out[note_at] = UserMessage.of(TRUNCATION_NOTE.format(count=removed) + gone)
        job.set_messages(out)
        return True


async def summarize_messages(messages: Sequence[AgentMessage], job: CompactionJob) -> str | None:
    """A summary of ``messages`` from the job's summary model, or ``None`` when the model
    could not give one. Raises :class:`CompactionCancelled` when the run was cancelled."""
    policy = job.policy
    provider = policy.summary_provider or job.provider
    if provider is None:
        return None
    model = policy.summary_model or job.model
    # in heuristic tokens, which the provider may count more of (calibration)
    chunk_budget = int(max(1024, job.window // 2) / max(1.0, job.tracker.scale))
    chunks: list[str] = []
    current: list[str] = []
    used = 0
    for line in render_transcript(messages):
        tokens = heuristic_tokens(line)  # chunk sizes need no exact count
        if current and used + tokens > chunk_budget:
            chunks.append("\n\n".join(current))
            current, used = [], 0
        current.append(line)
        used += tokens
    if current:
        chunks.append("\n\n".join(current))
    max_tokens = policy.summary_max_tokens or max(256, min(4096, job.target // 6))
    summary: str | None = None
    for chunk in chunks:
        if summary is None:
            prompt = f"The conversation to summarise:\n\n{chunk}"
        else:
            prompt = (
                f"The summary so far:\n\n{summary}\n\nThe conversation went on like this; "
                f"give one summary of all of it:\n\n{chunk}"
            )
        request = ModelRequest(
            model=model,
            system_prompt=policy.summary_prompt,
            messages=[UserMessage.of(prompt)],
            max_tokens=max_tokens,
        )
        if job.complete is not None:
            reply: AssistantMessage | None = await job.complete(request, provider)
            if reply is not None and reply.stop_reason == "aborted":
                raise CompactionCancelled("the summary call was cancelled")
        else:
            reply = await _complete(provider, request, job.cancel)
        if reply is None:
            return None
        info = lookup_model(
            reply.model or model,
            getattr(provider, "name", None),
            override=policy.model_info if model == job.model else None,
            catalog=policy.catalog,
        )
        job.usage = job.usage + with_cost(reply.usage, info)
        text = reply.text.strip()
        if not text or reply.stop_reason == "error":
            return None
        summary = text
    return summary


async def _complete(
    provider: Provider, request: ModelRequest, cancel: CancellationToken | None
) -> AssistantMessage | None:
    name = getattr(provider, "name", type(provider).__name__)
    try:
        final: AssistantMessage | None = None
        stream = provider.stream(request, cancel=cancel)
        try:
            async for event in stream:
                if isinstance(event, StreamDone):
                    final = event.message
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        return final
    except ProviderError as exc:
        if exc.kind == "cancelled":
            raise CompactionCancelled(exc.message) from exc
        logger.warning("the summary call to %s failed (%s): %s", name, exc.kind, exc.message)
        return None
    except Exception as exc:  # a provider bug must not break compaction
        logger.warning(
            "the summary call to %s raised %s: %s",
            name,
            type(exc).__name__,
            exc,
            exc_info=exc,
        )
        return None


# ---- the policy ----


class CompactionPolicy(BaseModel):
    """When and how a history is compacted (``AgentLoopConfig(compaction=...)``).

    Sizes are shares of the usable window: the context window (``context_window``, else
    ``model_info``, else the model catalog, else 8192) less ``reserve_tokens``. Before each
    model call the loop estimates the request (docs/contract.md §6); past ``warn_at`` it logs a
    warning on the ``treadle.context`` logger; past ``compact_at`` it compacts down to
    ``compact_to``; past ``fail_at`` (``None``: never) after that, the turn fails with a
    ``context_overflow`` error instead of sending a request the provider would refuse.
    Seed 003's values: warn 80 %, target 82 %, hard limit 95 %; seed 003 compacts "near the
    hard limit" without naming the point, and 90 % leaves room for the answer and for the
    summary call.

    ``strategies`` run in order until the history is under the target. ``keep_recent``
    (a share of the target, or a token count when above 1) is how much of the most recent
    conversation is kept verbatim; ``keep_first`` the largest share of the target the first
    exchange may take to be kept verbatim (0: summarise it too). The summary call uses
    ``summary_provider`` / ``summary_model`` when given, else the loop's own.
    ``tokenizer``: ``"auto"`` (tiktoken for the model, falling back to the heuristic), a
    tiktoken encoding name, or ``None`` for the heuristic alone.
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, arbitrary_types_allowed=True, defer_build=True
    )

    context_window: int | None = Field(default=None, gt=0)
    model_info: Union[ModelInfo, dict[str, Any], None] = None
    catalog: ModelCatalog | None = None
    reserve_tokens: int = Field(default=0, ge=0)
    warn_at: float = Field(default=0.80, gt=0, le=1)
    compact_at: float = Field(default=0.90, gt=0, le=1)
    compact_to: float = Field(default=0.82, gt=0, le=1)
    fail_at: float | None = Field(default=0.95, gt=0)
    strategies: tuple[Any, ...] = (TrimToolOutputs(), Summarize(), TruncateOldest())
    keep_recent: float = Field(default=0.4, gt=0)
    keep_first: float = Field(default=0.2, ge=0, le=1)
    summary_prompt: str = DEFAULT_SUMMARY_PROMPT
    summary_provider: Any = None
    summary_model: str | None = None
    summary_max_tokens: int | None = Field(default=None, gt=0)
    tokenizer: str | None = "auto"

    @model_validator(mode="after")
    def _check(self) -> CompactionPolicy:
        if self.compact_to >= self.compact_at:
            raise ValueError("compact_to must be below compact_at")
        if self.fail_at is not None and self.fail_at < self.compact_at:
            raise ValueError("fail_at must not be below compact_at")
        for strategy in self.strategies:
            if not isinstance(strategy, CompactionStrategy):
                raise ValueError(
                    f"{strategy!r} is not a compaction strategy (it needs name, last_resort "
                    "and an async apply(job))"
                )
        return self

    def model_for(self, model: str, provider: str | None = None) -> ModelInfo | None:
        """The catalog entry for ``model``, with ``model_info`` laid over it."""
        override = self.model_info
        return lookup_model(model, provider, override=override, catalog=self.catalog)

    def window_for(self, model: str, provider: str | None = None) -> int:
        """The context window: ``context_window``, else the model's, else 8192."""
        if self.context_window is not None:
            return self.context_window
        info = self.model_for(model, provider)
        return info.context_window if info is not None else DEFAULT_CONTEXT_WINDOW

    def budget(self, window: int) -> int:
        """The usable part of ``window`` (thresholds are shares of this)."""
        return max(1, window - self.reserve_tokens)

    def recent_budget(self, target: int) -> int:
        keep = self.keep_recent
        return int(keep) if keep > 1 else int(target * keep)

    def counter(self, model: str) -> TokenCounter:
        return TokenCounter(model, encoding=self.tokenizer)


__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "SUMMARY_PREFIX",
    "TRIM_MARKER",
    "TRUNCATION_NOTE",
    "CompactionJob",
    "CompactionPolicy",
    "CompactionStrategy",
    "Summarize",
    "TrimToolOutputs",
    "TruncateOldest",
    "message_groups",
    "render_transcript",
    "trim_text",
]
